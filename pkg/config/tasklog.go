package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// TaskLogSection is where Flyte keeps its log-link configuration:
// `plugins: logs:` in a Flyte configuration file. TaskLogConfig reads it with
// Flyte's keys, so the same block configures both executors.
const TaskLogSection = "plugins.logs"

// TaskLogConfig configures the log links sent with every event of a running
// or finished attempt.
type TaskLogConfig struct {
	IsKubernetesEnabled   bool   `json:"kubernetes-enabled"`
	KubernetesURL         string `json:"kubernetes-url,omitempty"`
	KubernetesTemplateURI string `json:"kubernetes-template-uri,omitempty"`

	IsCloudwatchEnabled   bool   `json:"cloudwatch-enabled,omitempty"`
	CloudwatchRegion      string `json:"cloudwatch-region,omitempty"`
	CloudwatchLogGroup    string `json:"cloudwatch-log-group,omitempty"`
	CloudwatchTemplateURI string `json:"cloudwatch-template-uri,omitempty"`

	IsStackDriverEnabled       bool   `json:"stackdriver-enabled,omitempty"`
	GCPProjectName             string `json:"gcp-project,omitempty"`
	StackdriverLogResourceName string `json:"stackdriver-logresourcename,omitempty"`
	StackDriverTemplateURI     string `json:"stackdriver-template-uri,omitempty"`

	// DynamicLogLinks are links a task asks for by name in its template's
	// config["link_type"] (comma-separated), or "vscode" when the container
	// enables it; their templates may use {{ .taskConfig.<key> }}.
	DynamicLogLinks map[string]TaskLogTemplate `json:"dynamic-log-links,omitempty"`
	// Templates are custom links for every attempt.
	Templates []TaskLogTemplate `json:"templates,omitempty"`
	// AzureLogTemplates link to Azure Log Analytics with a query.
	AzureLogTemplates []AzureLogTemplate `json:"azure-log-templates,omitempty"`
}

// TaskLogTemplate is one log link. URIs and the display name may use
// {{ .podName }}, {{ .namespace }}, {{ .containerName }}, {{ .containerId }},
// {{ .podUID }}, {{ .hostname }}, {{ .logName }}, {{ .podRFC3339StartTime }},
// {{ .podRFC3339FinishTime }}, {{ .podUnixStartTime }}, {{ .podUnixFinishTime }},
// {{ .taskID }}, {{ .taskVersion }}, {{ .taskOrg }}, {{ .taskProject }},
// {{ .taskDomain }}, {{ .taskRetryAttempt }}, {{ .nodeID }}, {{ .generatedName }},
// {{ .executionName }}, {{ .executionProject }}, {{ .executionDomain }},
// {{ .executionOrg }}, {{ .runName }} and {{ .actionName }}.
type TaskLogTemplate struct {
	Name                string           `json:"name,omitempty"`
	DisplayName         string           `json:"displayName,omitempty"`
	TemplateURIs        []string         `json:"templateUris,omitempty"`
	DynamicTemplateURIs []string         `json:"dynamicTemplateUris,omitempty"`
	MessageFormat       LogMessageFormat `json:"messageFormat,omitempty"`
	// Scheme is accepted for Flyte's older files; it has no effect.
	Scheme           json.RawMessage `json:"scheme,omitempty"`
	ShowWhilePending bool            `json:"showWhilePending,omitempty"`
	HideOnceFinished bool            `json:"hideOnceFinished,omitempty"`
	// LinkType is external (the default), dashboard or ide.
	LinkType string `json:"linkType,omitempty"`
	IconURI  string `json:"iconUri,omitempty"`
}

// AzureLogTemplate is a link to Azure Log Analytics: each template URI gets
// the query (gzipped, base64, URL-escaped) appended.
type AzureLogTemplate struct {
	TaskLogTemplate `json:",inline"`
	// QueryFormat is the query with template variables; empty: Flyte's
	// default query over ContainerLogV2.
	QueryFormat *string `json:"queryFormat,omitempty"`
}

// LogMessageFormat is TaskLog.MessageFormat: 0 unknown, 1 CSV, 2 JSON,
// written as a number or a name.
type LogMessageFormat int32

var logMessageFormats = map[string]LogMessageFormat{"UNKNOWN": 0, "CSV": 1, "JSON": 2}

// UnmarshalJSON accepts a number or a name.
func (f *LogMessageFormat) UnmarshalJSON(b []byte) error {
	var n int32
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 || n > 2 {
			return fmt.Errorf("messageFormat %d: want 0 (unknown), 1 (csv) or 2 (json)", n)
		}
		*f = LogMessageFormat(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("messageFormat: want a number or unknown, csv or json")
	}
	v, ok := logMessageFormats[strings.ToUpper(s)]
	if !ok {
		return fmt.Errorf("messageFormat %q: want unknown, csv or json", s)
	}
	*f = v
	return nil
}

// DefaultTaskLogConfig is Flyte's default: a Kubernetes dashboard link.
func DefaultTaskLogConfig() TaskLogConfig {
	return TaskLogConfig{
		IsKubernetesEnabled:   true,
		KubernetesTemplateURI: "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
	}
}

// Validate checks the link types.
func (c TaskLogConfig) Validate() error {
	var errs []error
	check := func(where string, t TaskLogTemplate) {
		switch strings.ToLower(t.LinkType) {
		case "", "external", "dashboard", "ide":
		default:
			errs = append(errs, fmt.Errorf("%s.linkType %q: want external, dashboard or ide", where, t.LinkType))
		}
	}
	for i, t := range c.Templates {
		check(fmt.Sprintf("plugins.logs.templates[%d]", i), t)
	}
	for i, t := range c.AzureLogTemplates {
		check(fmt.Sprintf("plugins.logs.azure-log-templates[%d]", i), t.TaskLogTemplate)
	}
	for name, t := range c.DynamicLogLinks {
		check("plugins.logs.dynamic-log-links."+name, t)
	}
	return errors.Join(errs...)
}
