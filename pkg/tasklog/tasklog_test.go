package tasklog_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tasklog"
)

var start = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func input() tasklog.Input {
	return tasklog.Input{
		PodName: "r1-a0-1", PodUID: "uid-1", Namespace: "flyte-dev", HostName: "node-7",
		ContainerName: "main", ContainerID: "containerd://abc123",
		PodStart: start, PodFinish: start.Add(time.Minute),
		Task: &core.Identifier{Org: "o", Project: "p", Domain: "d", Name: "wf.t", Version: "v9"},
		Org:  "o", Project: "p", Domain: "d", Run: "r1", Action: "a0", RetryAttempt: 1,
	}
}

func render(t *testing.T, cfg config.TaskLogConfig, in tasklog.Input) []*core.TaskLog {
	t.Helper()
	r, err := tasklog.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	links, err := r.Links(in)
	if err != nil {
		t.Fatal(err)
	}
	return links
}

func TestBuiltInLinks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      config.TaskLogConfig
		wantName string
		wantURI  string
	}{
		{"Flyte's default: the Kubernetes dashboard", config.DefaultTaskLogConfig(), "Kubernetes Logs",
			"http://localhost:30082/#!/log/flyte-dev/r1-a0-1/pod?namespace=flyte-dev"},
		{"Kubernetes from a console URL", config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "https://k8s.example"},
			"Kubernetes Logs", "https://k8s.example/#!/log/flyte-dev/r1-a0-1/pod?namespace=flyte-dev"},
		{"CloudWatch from region and group", config.TaskLogConfig{IsCloudwatchEnabled: true, CloudwatchRegion: "us-west-2", CloudwatchLogGroup: "/eks/x"},
			"Cloudwatch Logs", "https://console.aws.amazon.com/cloudwatch/home?region=us-west-2#logEventViewer:group=/eks/x;stream=var.log.containers.r1-a0-1_flyte-dev_main-abc123.log"},
		{"CloudWatch from a template", config.TaskLogConfig{IsCloudwatchEnabled: true, CloudwatchTemplateURI: "https://cw/{{ .podName }}/{{.containerName}}"},
			"Cloudwatch Logs", "https://cw/r1-a0-1/main"},
		{"Stackdriver", config.TaskLogConfig{IsStackDriverEnabled: true, GCPProjectName: "proj", StackdriverLogResourceName: "k8s_container"},
			"Google Cloud Logs", "https://console.cloud.google.com/logs/viewer?project=proj&angularJsUrl=%2Flogs%2Fviewer%3Fproject%3Dproj&resource=k8s_container&advancedFilter=resource.labels.pod_name%3Dr1-a0-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links := render(t, tc.cfg, input())
			if len(links) != 1 {
				t.Fatalf("%d links, want 1", len(links))
			}
			l := links[0]
			if l.GetName() != tc.wantName || l.GetUri() != tc.wantURI || l.GetMessageFormat() != core.TaskLog_JSON ||
				l.GetLinkType() != core.TaskLog_EXTERNAL || !l.GetReady() {
				t.Fatalf("got %v\nwant name %q uri %q", l, tc.wantName, tc.wantURI)
			}
		})
	}
}

func TestCustomTemplates(t *testing.T) {
	cfg := config.TaskLogConfig{Templates: []config.TaskLogTemplate{{
		DisplayName: "Grafana {{ .taskRetryAttempt }}",
		TemplateURIs: []string{
			"https://g/{{ .namespace }}/{{ .podName }}/{{ .containerName }}/{{ .containerId }}?from={{ .podUnixStartTime }}&to={{ .podUnixFinishTime }}",
			"https://g/{{$runName}}/{{ .ACTIONNAME }}/{{ .taskID }}@{{ .taskVersion }}/{{ .executionProject }}/{{ .executionDomain }}/{{ .executionOrg }}/{{ .podRFC3339StartTime }}/{{ .hostname }}/{{ .podUID }}",
			"https://g/{{ .unknownVar }}/{{ .generatedName }}",
		},
		LinkType: "dashboard", ShowWhilePending: true, HideOnceFinished: true, IconURI: "https://g/icon.svg",
		MessageFormat: 1,
	}}}
	in := input()
	in.LogName = " (main)"
	links := render(t, cfg, in)
	want := []string{
		"https://g/flyte-dev/r1-a0-1/main/abc123?from=1796292000&to=1796292060",
		"https://g/r1/a0/wf.t@v9/p/d/o/2026-12-03T10:00:00Z/node-7/uid-1",
		// Unknown variables and empty values are left as written.
		"https://g/{{ .unknownVar }}/{{ .generatedName }}",
	}
	if len(links) != len(want) {
		t.Fatalf("%d links, want %d", len(links), len(want))
	}
	for i, l := range links {
		if l.GetUri() != want[i] {
			t.Errorf("link %d: %s\nwant %s", i, l.GetUri(), want[i])
		}
		if l.GetName() != "Grafana 1 (main)" || l.GetLinkType() != core.TaskLog_DASHBOARD || !l.GetShowWhilePending() ||
			!l.GetHideOnceFinished() || l.GetIconUri() != "https://g/icon.svg" || l.GetMessageFormat() != core.TaskLog_CSV {
			t.Errorf("link %d: %v", i, l)
		}
	}
}

func TestTaskLinksDynamicLinksAndOrder(t *testing.T) {
	cfg := config.TaskLogConfig{
		IsKubernetesEnabled: true, KubernetesTemplateURI: "k8s://{{ .podName }}",
		Templates: []config.TaskLogTemplate{{DisplayName: "custom", TemplateURIs: []string{"custom://{{ .podName }}"}}},
		DynamicLogLinks: map[string]config.TaskLogTemplate{
			"vscode":  {DisplayName: "VS Code", TemplateURIs: []string{"https://ide/{{ .podName }}/{{ .taskConfig.port }}"}},
			"wandb":   {DisplayName: "W&B", TemplateURIs: []string{"https://wandb/{{ .taskConfig.project }}/{{ .taskConfig.missing }}"}},
			"unasked": {DisplayName: "never", TemplateURIs: []string{"https://never"}},
		},
	}
	in := input()
	in.TaskLinks = []*core.TaskLog{{Name: "SDK link", Uri: "https://sdk/{{ .runName }}", MessageFormat: core.TaskLog_CSV}}
	in.TaskConfig = map[string]string{"link_type": "wandb", "project": "exp1", "port": "8080"}
	in.EnableVSCode = true
	links := render(t, cfg, in)
	type link struct {
		name, uri string
		lt        core.TaskLog_LinkType
	}
	want := []link{
		{"SDK link", "https://sdk/r1", core.TaskLog_DASHBOARD},
		{"Kubernetes Logs", "k8s://r1-a0-1", core.TaskLog_EXTERNAL},
		{"custom", "custom://r1-a0-1", core.TaskLog_EXTERNAL},
		{"VS Code", "https://ide/r1-a0-1/8080", core.TaskLog_IDE},
		{"W&B", "https://wandb/exp1/{{ .taskConfig.missing }}", core.TaskLog_EXTERNAL},
	}
	if len(links) != len(want) {
		t.Fatalf("%d links, want %d: %v", len(links), len(want), links)
	}
	for i, l := range links {
		if got := (link{l.GetName(), l.GetUri(), l.GetLinkType()}); got != want[i] {
			t.Errorf("link %d = %+v, want %+v", i, got, want[i])
		}
	}
}

// The placeholder rule, one string at a time through a custom template.
func TestPlaceholders(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"{{ .podName }}", "r1-a0-1"},
		{"{{.podName}}|{{\t$PODNAME\n}}|{{ .PodName}}", "r1-a0-1|r1-a0-1|r1-a0-1"},
		{"no placeholder", "no placeholder"},
		{"{{ podName }}|{{ .podName }|{{ .pod Name }}|{{ . podName }}", "{{ podName }}|{{ .podName }|{{ .pod Name }}|{{ . podName }}"},
		{"{{{ .podName }}}", "{r1-a0-1}"},
		{"{{ .a{{ .podName }}", "{{ .a" + "r1-a0-1"},
		{"{{ .generatedName }}/{{ .podName }}", "{{ .generatedName }}/r1-a0-1"},
		{"{{ .unknown }}{{ .podName }}{{ .namespace }}", "{{ .unknown }}r1-a0-1flyte-dev"},
		// A value is not a template: the run's name is not rendered again.
		{"{{ .runName }}", "{{ .podName }}"},
		{"{{ .taskConfig.port }}", "{{ .taskConfig.port }}"}, // task config only in dynamic links
		// Extra variables come before the pod's facts; an empty one does not count.
		{"{{ .executionDomain }}|{{ .hostname }}|{{ .shard }}|{{ .logName }}", "dom-extra|node-7|{{ .shard }}| (main)"},
		{"{{ .containerId }}", "abc"}, // the runtime's prefix dropped
	} {
		in := input()
		in.Run = "{{ .podName }}"
		in.TaskConfig = map[string]string{"port": "8080"}
		in.Extra = map[string]string{"EXECUTIONDOMAIN": "dom-extra", "shard": "", "hostname": ""}
		in.HostName, in.ContainerID, in.LogName = "node-7", "containerd://abc", " (main)"
		links := render(t, config.TaskLogConfig{Templates: []config.TaskLogTemplate{{TemplateURIs: []string{tc.uri}}}}, in)
		if got := links[0].GetUri(); got != tc.want {
			t.Errorf("%q rendered %q, want %q", tc.uri, got, tc.want)
		}
	}
	cfg := config.TaskLogConfig{DynamicLogLinks: map[string]config.TaskLogTemplate{"wandb": {TemplateURIs: []string{
		"{{ .taskConfig.port }}|{{ .taskConfig$port }}|{{ .TASKCONFIG.PORT }}|{{ .taskConfig.missing }}|{{ .taskConfigxport }}"}}}}
	in := input()
	in.TaskConfig = map[string]string{"link_type": "wandb", "port": "8080"}
	if got, want := render(t, cfg, in)[0].GetUri(), "8080|8080|8080|{{ .taskConfig.missing }}|{{ .taskConfigxport }}"; got != want {
		t.Errorf("dynamic link %q, want %q", got, want)
	}
}

func TestAzureLink(t *testing.T) {
	q := `PodName == "{{.podName}}" and NS == "{{ .namespace }}"`
	cfg := config.TaskLogConfig{AzureLogTemplates: []config.AzureLogTemplate{
		{TaskLogTemplate: config.TaskLogTemplate{TemplateURIs: []string{"https://portal.azure.com/q="}}, QueryFormat: &q},
		{TaskLogTemplate: config.TaskLogTemplate{DisplayName: "Default query", TemplateURIs: []string{"https://portal.azure.com/q="}}},
	}}
	links := render(t, cfg, input())
	if len(links) != 2 || links[0].GetName() != "Azure Logs" || links[1].GetName() != "Default query" {
		t.Fatalf("links %v", links)
	}
	decode := func(uri string) string {
		t.Helper()
		esc := strings.TrimPrefix(uri, "https://portal.azure.com/q=")
		b64, err := url.QueryUnescape(esc)
		if err != nil {
			t.Fatal(err)
		}
		gz, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := decode(links[0].GetUri()); got != `PodName == "r1-a0-1" and NS == "flyte-dev"` {
		t.Errorf("query %q", got)
	}
	if got := decode(links[1].GetUri()); !strings.Contains(got, `ContainerName == "main"`) || !strings.Contains(got, `datetime("2026-12-03T10:00:00Z")`) {
		t.Errorf("default query %q", got)
	}
}

// A `plugins.logs` block as Flyte's chart writes it loads and renders.
func TestFlyteConfigBlock(t *testing.T) {
	block := `
kubernetes-enabled: true
kubernetes-template-uri: http://localhost:30080/kubernetes-dashboard/#/log/{{.namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}
cloudwatch-enabled: false
stackdriver-enabled: false
templates:
  - displayName: Grafana
    templateUris:
      - "https://grafana/explore?pod={{ .podName }}"
    messageFormat: 2
    scheme: TaskExecution
dynamic-log-links:
  vscode:
    displayName: VS Code Debugger
    templateUris:
      - /dataplane/pod/v1/generated_name/task/{{.executionProject}}/{{.executionDomain}}/{{.executionName}}/{{.nodeID}}/{{.taskRetryAttempt}}/{{.taskProject}}/{{.taskDomain}}/{{.taskID}}/{{.taskVersion}}/
`
	c := config.DefaultTaskLogConfig()
	if err := yaml.UnmarshalStrict([]byte(block), &c); err != nil {
		t.Fatal(err)
	}
	in := input()
	links := render(t, c, in)
	if len(links) != 2 || links[0].GetUri() != "http://localhost:30080/kubernetes-dashboard/#/log/flyte-dev/r1-a0-1/pod?namespace=flyte-dev" ||
		links[1].GetUri() != "https://grafana/explore?pod=r1-a0-1" {
		t.Fatalf("links %v", links)
	}
	in.EnableVSCode, in.NodeID = true, "a0"
	links = render(t, c, in)
	if len(links) != 3 || links[2].GetLinkType() != core.TaskLog_IDE ||
		links[2].GetUri() != "/dataplane/pod/v1/generated_name/task/p/d/r1/a0/1/p/d/wf.t/v9/" {
		t.Fatalf("with VS Code: %v", links)
	}
}

func TestInvalidLinkType(t *testing.T) {
	_, err := tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{{LinkType: "popup"}}})
	if err == nil || !strings.Contains(err.Error(), `linkType "popup"`) {
		t.Fatalf("err = %v", err)
	}
	var f config.LogMessageFormat
	for in, want := range map[string]config.LogMessageFormat{`2`: 2, `"json"`: 2, `"CSV"`: 1} {
		if err := f.UnmarshalJSON([]byte(in)); err != nil || f != want {
			t.Errorf("messageFormat %s = %d, %v", in, f, err)
		}
	}
	for _, bad := range []string{`7`, `"xml"`, `true`} {
		if err := f.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("messageFormat %s accepted", bad)
		}
	}
}

// The links of an attempt are rendered for each event that carries them.
func BenchmarkLinks(b *testing.B) {
	cfg := config.DefaultTaskLogConfig()
	cfg.Templates = []config.TaskLogTemplate{{DisplayName: "Grafana {{ .taskRetryAttempt }}", TemplateURIs: []string{
		"https://g/{{ .namespace }}/{{ .podName }}/{{ .containerName }}?from={{ .podUnixStartTime }}&to={{ .podUnixFinishTime }}"}}}
	r, err := tasklog.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	in := input()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Links(in); err != nil {
			b.Fatal(err)
		}
	}
}
