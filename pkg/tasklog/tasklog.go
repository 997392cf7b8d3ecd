// Package tasklog renders an attempt's log links from Flyte's log-link
// configuration (config.TaskLogConfig): the Kubernetes dashboard, CloudWatch,
// Stackdriver, Azure Log Analytics, custom templates, the task's own links
// and dynamic links the task asks for. It is pure: the caller gathers the
// pod's facts into an Input.
package tasklog

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
)

// Display names of the built-in links, Flyte's.
const (
	KubernetesName  = "Kubernetes Logs"
	CloudwatchName  = "Cloudwatch Logs"
	StackdriverName = "Google Cloud Logs"
	AzureName       = "Azure Logs"
)

// vscodeLinkType is the dynamic link a container that enables VS Code gets.
const vscodeLinkType = "vscode"

// The query Flyte's Azure links run when none is configured.
const defaultAzureQuery = `let StartTime = datetime_add('hour', -1, datetime("{{.podRFC3339StartTime}}"));
let FinishTime = datetime_add('hour', 1, datetime("{{.podRFC3339FinishTime}}"));
ContainerLogV2
| where TimeGenerated between (StartTime .. FinishTime)
 and ContainerName == "{{.containerName}}"
 and PodName == "{{.podName}}"
 and PodNamespace == "{{.namespace}}"`

// Input is what the links of one container of an attempt's pod are made of.
type Input struct {
	PodName, PodUID, Namespace, HostName string
	ContainerName                        string
	// ContainerID as the kubelet reports it ("containerd://abc"); the
	// runtime prefix is dropped.
	ContainerID string
	// LogName is appended to every display name (e.g. " (main)").
	LogName              string
	PodStart, PodFinish  time.Time
	Task                 *core.Identifier
	Org, Project, Domain string
	Run, Action          string
	// RetryAttempt is 0-based, as Flyte's templates see it.
	RetryAttempt  uint32
	NodeID        string
	GeneratedName string
	// TaskConfig is the template's config map: its "link_type" names
	// dynamic links, and {{ .taskConfig.<key> }} reads it.
	TaskConfig map[string]string
	// TaskLinks are the template's metadata.log_links.
	TaskLinks []*core.TaskLog
	// EnableVSCode asks for the "vscode" dynamic link.
	EnableVSCode bool
	// Extra are further variables: name (without the dot) to value.
	Extra map[string]string
}

// template is one configured link source.
type template struct {
	name, display        string
	uris, dynamicURIs    []string
	format               core.TaskLog_MessageFormat
	showPending, hideEnd bool
	linkType             core.TaskLog_LinkType
	icon                 string
	azureQuery           *string // set for Azure links
}

// Renderer renders links from a configuration; build it once with New.
type Renderer struct {
	// Each template gives its static links, then the dynamic ones the task asks for.
	templates []template
}

func linkType(s string) core.TaskLog_LinkType {
	if s == "" {
		return core.TaskLog_EXTERNAL
	}
	return core.TaskLog_LinkType(core.TaskLog_LinkType_value[strings.ToUpper(s)])
}

func fromConfig(t config.TaskLogTemplate) template {
	return template{name: t.Name, display: t.DisplayName, uris: t.TemplateURIs, dynamicURIs: t.DynamicTemplateURIs,
		format: core.TaskLog_MessageFormat(t.MessageFormat), showPending: t.ShowWhilePending, hideEnd: t.HideOnceFinished,
		linkType: linkType(t.LinkType), icon: t.IconURI}
}

// New builds the link sources cfg enables, in Flyte's order: Kubernetes,
// CloudWatch, Stackdriver, Azure, custom templates; dynamic links last.
func New(cfg config.TaskLogConfig) (*Renderer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Renderer{}
	builtin := func(enabled bool, name, override, generated string) {
		if !enabled {
			return
		}
		uri := override
		if uri == "" {
			uri = generated
		}
		r.templates = append(r.templates, template{display: name, uris: []string{uri}, format: core.TaskLog_JSON})
	}
	builtin(cfg.IsKubernetesEnabled, KubernetesName, cfg.KubernetesTemplateURI,
		cfg.KubernetesURL+"/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}")
	builtin(cfg.IsCloudwatchEnabled, CloudwatchName, cfg.CloudwatchTemplateURI,
		fmt.Sprintf("https://console.aws.amazon.com/cloudwatch/home?region=%s#logEventViewer:group=%s;stream=var.log.containers.{{ .podName }}_{{ .namespace }}_{{ .containerName }}-{{ .containerId }}.log",
			cfg.CloudwatchRegion, cfg.CloudwatchLogGroup))
	builtin(cfg.IsStackDriverEnabled, StackdriverName, cfg.StackDriverTemplateURI,
		fmt.Sprintf("https://console.cloud.google.com/logs/viewer?project=%s&angularJsUrl=%%2Flogs%%2Fviewer%%3Fproject%%3D%s&resource=%s&advancedFilter=resource.labels.pod_name%%3D{{ .podName }}",
			cfg.GCPProjectName, cfg.GCPProjectName, cfg.StackdriverLogResourceName))
	for _, a := range cfg.AzureLogTemplates {
		t := fromConfig(a.TaskLogTemplate)
		if t.display == "" {
			t.display = AzureName
		}
		q := defaultAzureQuery
		if a.QueryFormat != nil {
			q = *a.QueryFormat
		}
		t.azureQuery = &q
		r.templates = append(r.templates, t)
	}
	for _, c := range cfg.Templates {
		r.templates = append(r.templates, fromConfig(c))
	}
	names := make([]string, 0, len(cfg.DynamicLogLinks))
	for n := range cfg.DynamicLogLinks {
		names = append(names, n)
	}
	sort.Strings(names) // a stable order: the configuration is a map
	for _, n := range names {
		c := cfg.DynamicLogLinks[n]
		t := fromConfig(c)
		// A dynamic link's templateUris are its dynamic URIs, as in Flyte.
		t.name, t.format, t.uris = n, core.TaskLog_JSON, nil
		t.dynamicURIs = append(slices.Clip(c.TemplateURIs), c.DynamicTemplateURIs...)
		r.templates = append(r.templates, t)
	}
	return r, nil
}

// variable is one template variable: {{ .name }} or {{ $name }}, any case.
type variable struct{ name, value string }

// vars are the variables of an Input, looked up by name (any case) when a
// template asks for one: most templates use two or three of them, and links
// are rendered for every report of an attempt. The first with a value wins,
// in this order: logName, Extra (by name), the pod's and the task's facts,
// then (for dynamic links) the task config's entries.
type vars struct {
	in         *Input
	extra      []variable // Extra, sorted by name
	taskConfig []variable // "taskConfig.<key>", sorted; dynamic links only
}

func newVars(in *Input) *vars {
	v := &vars{in: in}
	for _, k := range slices.Sorted(maps.Keys(in.Extra)) {
		v.extra = append(v.extra, variable{k, in.Extra[k]})
	}
	return v
}

// withTaskConfig is v with the task config's entries as variables.
func (v *vars) withTaskConfig() *vars {
	w := *v
	for _, k := range slices.Sorted(maps.Keys(v.in.TaskConfig)) {
		w.taskConfig = append(w.taskConfig, variable{taskConfigPrefix + k, v.in.TaskConfig[k]})
	}
	return &w
}

// fact is the value of a built-in variable, by its lower-case name.
func (in *Input) fact(name string) string {
	unix := func(t time.Time) string {
		if t.IsZero() {
			return "0"
		}
		return strconv.FormatInt(t.Unix(), 10)
	}
	rfc := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	switch name {
	case "podname":
		return in.PodName
	case "poduid":
		return in.PodUID
	case "namespace":
		return in.Namespace
	case "containername":
		return in.ContainerName
	case "containerid":
		if _, id, ok := strings.Cut(in.ContainerID, "://"); ok {
			return id
		}
		return in.ContainerID
	case "hostname":
		return in.HostName
	case "nodeid":
		return in.NodeID
	case "generatedname":
		return in.GeneratedName
	case "taskretryattempt":
		return strconv.FormatUint(uint64(in.RetryAttempt), 10)
	case "taskid":
		return in.Task.GetName()
	case "taskversion":
		return in.Task.GetVersion()
	case "taskorg":
		return in.Task.GetOrg()
	case "taskproject":
		return in.Task.GetProject()
	case "taskdomain":
		return in.Task.GetDomain()
	case "executionname", "runname":
		return in.Run
	case "actionname":
		return in.Action
	case "executionproject":
		return in.Project
	case "executiondomain":
		return in.Domain
	case "executionorg":
		return in.Org
	case "podrfc3339starttime":
		return rfc(in.PodStart)
	case "podrfc3339finishtime":
		return rfc(in.PodFinish)
	case "podunixstarttime":
		return unix(in.PodStart)
	case "podunixfinishtime":
		return unix(in.PodFinish)
	}
	return ""
}

// render substitutes vars in s in one pass (links are rendered for every
// report of an attempt). A placeholder is "{{", spaces, "." or "$", a
// variable's name in any case, spaces, "}}"; the first variable of that name
// with a value replaces it, and a placeholder of none is left as written.
// Values are not scanned again.
func render(s string, vars *vars) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := strings.Index(s, "{{"); i >= 0; {
		if name, n, ok := placeholder(s[i:]); ok {
			if value, ok := vars.lookup(name); ok {
				b.WriteString(s[done:i])
				b.WriteString(value)
				done = i + n
				j := strings.Index(s[done:], "{{")
				if j < 0 {
					break
				}
				i = done + j
				continue
			}
		}
		j := strings.Index(s[i+1:], "{{")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// placeholder reads the placeholder t begins with ("{{"): the variable's
// name and the placeholder's length.
func placeholder(t string) (name string, n int, ok bool) {
	k := skipSpaces(t, 2)
	if k >= len(t) || (t[k] != '.' && t[k] != '$') {
		return "", 0, false
	}
	start := k + 1
	for k = start; k < len(t) && !isSpace(t[k]) && t[k] != '}'; k++ {
	}
	name = t[start:k]
	k = skipSpaces(t, k)
	if name == "" || !strings.HasPrefix(t[k:], "}}") {
		return "", 0, false
	}
	return name, k + 2, true
}

// isSpace is a regular expression's \s, as Flyte's templates are matched.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func skipSpaces(t string, k int) int {
	for k < len(t) && isSpace(t[k]) {
		k++
	}
	return k
}

// lookup is the value of the first variable named name (any case) that has
// one. A task config entry may be written .taskConfig.key or .taskConfig$key.
func (v *vars) lookup(name string) (string, bool) {
	if p := len(taskConfigPrefix) - 1; len(name) > p && name[p] == '$' && strings.EqualFold(name[:p], taskConfigPrefix[:p]) {
		name = taskConfigPrefix + name[p+1:]
	}
	if v.in.LogName != "" && strings.EqualFold(name, "logName") {
		return v.in.LogName, true
	}
	if value, ok := firstOf(v.extra, name); ok {
		return value, true
	}
	if value := v.in.fact(strings.ToLower(name)); value != "" {
		return value, true
	}
	return firstOf(v.taskConfig, name)
}

func firstOf(vars []variable, name string) (string, bool) {
	for _, v := range vars {
		if v.value != "" && strings.EqualFold(v.name, name) {
			return v.value, true
		}
	}
	return "", false
}

const taskConfigPrefix = "taskConfig."

// Links renders every link of in.
func (r *Renderer) Links(in Input) ([]*core.TaskLog, error) {
	vs := newVars(&in)
	var out []*core.TaskLog
	// The task's own links come first, as dashboards.
	for _, l := range in.TaskLinks {
		out = append(out, &core.TaskLog{Uri: render(l.GetUri(), vs), Name: render(l.GetName(), vs) + render(in.LogName, vs),
			MessageFormat: l.GetMessageFormat(), LinkType: core.TaskLog_DASHBOARD, IconUri: l.GetIconUri(), Ready: true})
	}
	kinds := dynamicKinds(in)
	var dv *vars // vars and the task config's entries, for dynamic links
	for _, t := range r.templates {
		if t.azureQuery != nil {
			q, err := azureQuery(render(*t.azureQuery, vs))
			if err != nil {
				return nil, err
			}
			for _, base := range t.uris {
				out = append(out, &core.TaskLog{Name: t.display + in.LogName, Uri: base + q, MessageFormat: core.TaskLog_JSON})
			}
			continue
		}
		for _, uri := range t.uris {
			out = append(out, &core.TaskLog{Uri: render(uri, vs), Name: render(t.display, vs) + render(in.LogName, vs),
				MessageFormat: t.format, ShowWhilePending: t.showPending, HideOnceFinished: t.hideEnd,
				LinkType: t.linkType, IconUri: t.icon, Ready: true})
		}
		if t.name == "" || !slices.Contains(kinds, t.name) {
			continue
		}
		lt := t.linkType
		if t.name == vscodeLinkType {
			lt = core.TaskLog_IDE
		}
		if dv == nil {
			dv = vs.withTaskConfig()
		}
		for _, uri := range t.dynamicURIs {
			out = append(out, &core.TaskLog{Uri: render(uri, dv), Name: t.display + in.LogName, MessageFormat: t.format,
				ShowWhilePending: t.showPending, HideOnceFinished: t.hideEnd, LinkType: lt, IconUri: t.icon, Ready: true})
		}
	}
	return out, nil
}

// dynamicKinds are the dynamic links in asks for, sorted and without repeats.
func dynamicKinds(in Input) []string {
	var kinds []string
	if lt := in.TaskConfig["link_type"]; lt != "" {
		kinds = strings.Split(lt, ",")
	}
	if in.EnableVSCode {
		kinds = append(kinds, vscodeLinkType)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// azureQuery is query gzipped, base64-encoded and escaped for a URL.
func azureQuery(query string) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(query)); err != nil {
		return "", fmt.Errorf("azure log query: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("azure log query: %w", err)
	}
	return url.QueryEscape(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}
