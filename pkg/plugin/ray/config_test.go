package ray

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/taskaction/executor/pkg/config"
)

// load reads a configuration file holding text.
func load(t *testing.T, text string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return LoadConfig(cfg)
}

// TestDefaultConfig: without a plugins.ray section the plugin has Flyte's
// defaults (flyteplugins/go/tasks/plugins/k8s/ray/config.go).
func TestDefaultConfig(t *testing.T) {
	got, err := LoadConfig(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		ShutdownAfterJobFinishes: true, TTLSecondsAfterFinished: 3600, ServiceType: "NodePort", SubmissionMode: "K8sJobMode",
		IncludeDashboard: true, DashboardHost: "0.0.0.0", ServiceAccount: "default",
		Defaults: NodeDefaults{
			HeadNode:   NodeConfig{StartParameters: map[string]string{"disable-usage-stats": "true"}, IPAddress: "$MY_POD_IP"},
			WorkerNode: NodeConfig{StartParameters: map[string]string{"disable-usage-stats": "true"}, IPAddress: "$MY_POD_IP"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %+v\nwant %+v", got, want)
	}
}

// TestLoadConfig: Flyte's keys, read as Flyte's loader reads them.
func TestLoadConfig(t *testing.T) {
	got, err := load(t, `
plugins:
  ray:
    shutdownAfterJobFinishes: false
    ttlSecondsAfterFinished: "120"
    serviceType: ClusterIP
    submissionMode: HTTPMode
    includeDashboard: false
    dashboardHost: 127.0.0.1
    enableUsageStats: true
    serviceAccount: ray
    remoteClusterConfig:
      endpoint: 127.0.0.1
      auth:
        tokenPath: /path/token
    defaults:
      headNode:
        startParameters:
          num-cpus: "0"
      workerNode:
        ipAddress: 10.0.0.1
    dashboardURLTemplate:
      displayName: Ray Dashboard
      templateUris:
      - "https://ray.example.com/{{ .namespace }}/{{ .rayClusterName }}"
    logs:
      kubernetes-enabled: true
      kubernetes-template-uri: "https://k8s.example.com/{{ .podName }}"
    logsSidecar:
      name: shipper
      image: fluent/fluent-bit:3.0
      resources:
        requests:
          cpu: 100m
`)
	if err != nil {
		t.Fatal(err)
	}
	if got.ShutdownAfterJobFinishes || got.TTLSecondsAfterFinished != 120 || got.ServiceType != "ClusterIP" ||
		got.SubmissionMode != "HTTPMode" || got.IncludeDashboard || got.DashboardHost != "127.0.0.1" ||
		!got.EnableUsageStats || got.ServiceAccount != "ray" {
		t.Errorf("scalars = %+v", got)
	}
	// A mapping replaces the default one; a node kind keeps what its
	// section does not name.
	if h := got.Defaults.HeadNode; !reflect.DeepEqual(h.StartParameters, map[string]string{"num-cpus": "0"}) || h.IPAddress != "$MY_POD_IP" {
		t.Errorf("head defaults = %+v", h)
	}
	if w := got.Defaults.WorkerNode; w.IPAddress != "10.0.0.1" || w.StartParameters["disable-usage-stats"] != "true" {
		t.Errorf("worker defaults = %+v", w)
	}
	if d := got.DashboardURLTemplate; d == nil || d.DisplayName != "Ray Dashboard" || len(d.TemplateURIs) != 1 {
		t.Errorf("dashboard template = %+v", d)
	}
	if l := got.Logs; l == nil || !l.IsKubernetesEnabled || l.KubernetesTemplateURI != "https://k8s.example.com/{{ .podName }}" {
		t.Errorf("logs = %+v", l)
	}
	if s := got.LogsSidecar; s == nil || s.Name != "shipper" || s.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("logs sidecar = %+v", s)
	}
	if _, err := NewWithConfig(got); err != nil {
		t.Errorf("NewWithConfig: %v", err)
	}
}

// TestDeprecatedNodeIPAddress: Flyte's older nodeIPAddress fills a node
// kind's empty IP address.
func TestDeprecatedNodeIPAddress(t *testing.T) {
	got, err := load(t, `
plugins:
  ray:
    nodeIPAddress: 0.0.0.0
    defaults:
      headNode:
        ipAddress: ""
      workerNode:
        ipAddress: 10.0.0.1
`)
	if err != nil {
		t.Fatal(err)
	}
	if got.Defaults.HeadNode.IPAddress != "0.0.0.0" || got.Defaults.WorkerNode.IPAddress != "10.0.0.1" {
		t.Errorf("ip addresses = %q, %q", got.Defaults.HeadNode.IPAddress, got.Defaults.WorkerNode.IPAddress)
	}
}

// TestConfigRefused: what would fail every Ray task stops the executor at
// its start, naming the key.
func TestConfigRefused(t *testing.T) {
	cases := []struct{ name, section, want string }{
		{"submission mode", "submissionMode: InteractiveMode", "plugins.ray.submissionMode"},
		{"service type", "serviceType: Headless", "plugins.ray.serviceType"},
		{"negative ttl", "ttlSecondsAfterFinished: -1", "plugins.ray.ttlSecondsAfterFinished"},
		{"remote cluster", "remoteClusterConfig: {enabled: true}", "plugins.ray.remoteClusterConfig.enabled"},
		{"log link type", "logs: {templates: [{templateUris: [x], linkType: bogus}]}", "plugins.ray.logs"},
		{"unnamed sidecar", "logsSidecar: {image: busybox}", "plugins.ray.logsSidecar.name"},
		{"not a number", "ttlSecondsAfterFinished: soon", "plugins.ray.ttlSecondsAfterFinished"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte("plugins:\n  ray:\n    "+tc.section+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path, nil)
			if err == nil {
				_, err = New(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one naming %s", err, tc.want)
			}
		})
	}
}
