package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/pkg/config"
)

// chartFiles is the glob of a set of files as Flyte's charts render them, one
// per ConfigMap (or Secret) key, as mounted in /etc/flyte/config.d.
func chartFiles(name string) string {
	return filepath.Join("testdata", "flyte-charts", name, "*.yaml")
}

// The files Flyte's charts render load through the glob their deployment
// passes (--config /etc/flyte/config.d/*.yaml), with Flyte's defaults for
// what they do not set and the list form of maps read as maps.
func TestFlyteChartConfigs(t *testing.T) {
	safeToEvict := map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
	chartPlugins := map[string]string{"container": "container", "container_array": "k8s-array", "sidecar": "sidecar"}
	cases := []struct {
		name  string
		check func(t *testing.T, c config.Config)
	}{
		{"flyte-binary", func(t *testing.T, c config.Config) {
			// Nothing of the executor's own: its defaults.
			if !reflect.DeepEqual(withoutFlyteSections(c), withoutFlyteSections(config.Default())) {
				t.Errorf("executor section %+v, want the defaults", withoutFlyteSections(c))
			}
			k := c.K8sPlugin
			eq(t, "default-env-vars", k.DefaultEnvVars, map[string]string{
				"_U_EP_OVERRIDE": "flyte-binary-http.flyte:8090", "_U_INSECURE": "true", "_U_USE_ACTIONS": "1"})
			eq(t, "default-annotations (Flyte's default)", k.DefaultAnnotations, safeToEvict)
			eq(t, "gpu-resource-name (Flyte's default)", k.GPUResourceName, corev1.ResourceName("nvidia.com/gpu"))
			eq(t, "task plugins", c.TaskPlugins, chartPlugins)
			// A boolean in a map of strings is "1"/"0", as Flyte reads it.
			eq(t, "storage", c.Storage, config.StorageConfig{
				Type: "stow", Container: "my-organization-flyte-container",
				Stow: config.StowConfig{Kind: "s3", Config: map[string]string{
					"region": "us-east-1", "disable_ssl": "0", "v2_signing": "0", "auth_type": "iam"}},
				Limits: config.StorageLimits{GetLimitMegabytes: 2},
			})
			l := c.TaskLogs
			eq(t, "kubernetes-enabled", l.IsKubernetesEnabled, false)
			eq(t, "kubernetes-template-uri (Flyte's default)", l.KubernetesTemplateURI, config.DefaultTaskLogConfig().KubernetesTemplateURI)
		}},
		{"flyte-devbox", func(t *testing.T, c config.Config) {
			k := c.K8sPlugin
			// The inline list replaces the chart's list (lists are not merged).
			eq(t, "default-env-vars", k.DefaultEnvVars, map[string]string{
				"FLYTE_AWS_ENDPOINT": "http://rustfs-svc.flyte:9000", "FLYTE_AWS_ACCESS_KEY_ID": "rustfs",
				"FLYTE_AWS_SECRET_ACCESS_KEY": "rustfsstorage", "_U_EP_OVERRIDE": "flyte-binary-http.flyte:8090",
				"_U_INSECURE": "true", "_U_USE_ACTIONS": "1"})
			eq(t, "default-annotations (Flyte's default)", k.DefaultAnnotations, safeToEvict)
			// 003-storage.yaml, the Secret's 013-storage-secrets.yaml and the
			// inline file merged key by key.
			s := c.Storage
			eq(t, "stow config", s.Stow.Config, map[string]string{
				"region": "us-east-1", "disable_ssl": "1", "v2_signing": "1", "endpoint": "http://rustfs-svc.flyte:9000",
				"auth_type": "accesskey", "access_key_id": "rustfs", "secret_key": "rustfsstorage"})
			eq(t, "container", s.Container, "flyte-data")
			// `signedURL` is the key signedUrl, spelt in another case.
			eq(t, "signedUrl", s.SignedURL, map[string]any{"stowConfigOverride": map[string]any{"endpoint": "http://localhost:30002"}})
			eq(t, "task plugins", c.TaskPlugins, chartPlugins)
		}},
		{"flyte-binary-inline", func(t *testing.T, c config.Config) {
			// The executor section in Flyte's spelling and other cases, with
			// strings for numbers and booleans.
			eq(t, "eventsServiceURL", c.EventsServiceURL, "http://flyte-flyte-binary-http.flyte:8090")
			eq(t, "cacheServiceURL", c.CacheServiceURL, "http://flyte-flyte-binary-http.flyte:8090")
			eq(t, "maxConcurrentReconciles", c.MaxConcurrentReconciles, 128)
			eq(t, "leaderElect", c.LeaderElect, true)
			eq(t, "gc", c.GC, config.GCConfig{Interval: config.Duration{Duration: time.Hour}, MaxTTL: config.Duration{Duration: 24 * time.Hour}})
			eq(t, "requeueDuration (default)", c.RequeueDuration.Duration, 10*time.Second)
			k := c.K8sPlugin
			eq(t, "default-env-vars", k.DefaultEnvVars, map[string]string{
				"_U_EP_OVERRIDE": "flyte-flyte-binary-http.flyte:8090", "_U_INSECURE": "true", "_U_USE_ACTIONS": "1",
				"GOOGLE_CLOUD_PROJECT": "acme-ml"})
			// The file's annotations replace Flyte's default; keys keep their case.
			eq(t, "default-annotations", k.DefaultAnnotations, map[string]string{
				"cluster-autoscaler.kubernetes.io/safe-to-evict": "true", "acme.dev/Owner": "ml-platform"})
			eq(t, "default-labels", k.DefaultLabels, map[string]string{"team": "ml"})
			eq(t, "default-tolerations", k.DefaultTolerations, []corev1.Toleration{
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "flyte", Effect: corev1.TaintEffectNoSchedule}})
			eq(t, "interruptible-tolerations", k.InterruptibleTolerations, []corev1.Toleration{
				{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}})
			eq(t, "interruptible-node-selector-requirement", k.InterruptibleNodeSelectorRequirement, &corev1.NodeSelectorRequirement{
				Key: "cloud.google.com/gke-spot", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}})
			eq(t, "non-interruptible-node-selector-requirement", k.NonInterruptibleNodeSelectorRequirement, &corev1.NodeSelectorRequirement{
				Key: "cloud.google.com/gke-spot", Operator: corev1.NodeSelectorOpDoesNotExist})
			// Mappings merge across files: the chart's task types and the inline one.
			eq(t, "task plugins", c.TaskPlugins, map[string]string{
				"container": "container", "container_array": "k8s-array", "sidecar": "sidecar", "python-task": "container"})
			eq(t, "stow", c.Storage.Stow, config.StowConfig{Kind: "google", Config: map[string]string{
				"json": "", "project_id": "acme-ml", "scopes": "https://www.googleapis.com/auth/cloud-platform"}})
			eq(t, "kubernetes-template-uri", c.TaskLogs.KubernetesTemplateURI,
				"https://dashboard.acme.dev/#/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(chartFiles(tc.name), nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v\nwant %#v", what, got, want)
	}
}

func withoutFlyteSections(c config.Config) config.Config {
	c.Storage, c.TaskLogs, c.K8sPlugin, c.TaskPlugins, c.PluginSections = config.StorageConfig{}, config.TaskLogConfig{}, config.K8sPluginConfig{}, nil, nil
	return c
}

// Flyte's defaults of the keys the executor reads from its sections.
func TestFlyteSectionDefaults(t *testing.T) {
	d := config.Default()
	eq(t, "plugins.k8s.default-annotations", d.K8sPlugin.DefaultAnnotations, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
	eq(t, "plugins.k8s.gpu-resource-name", d.K8sPlugin.GPUResourceName, corev1.ResourceName("nvidia.com/gpu"))
	for what, v := range map[string]any{
		"default-env-vars": d.K8sPlugin.DefaultEnvVars, "default-labels": d.K8sPlugin.DefaultLabels,
		"default-node-selector": d.K8sPlugin.DefaultNodeSelector, "default-tolerations": d.K8sPlugin.DefaultTolerations,
		"interruptible-tolerations": d.K8sPlugin.InterruptibleTolerations, "interruptible-node-selector": d.K8sPlugin.InterruptibleNodeSelector,
		"interruptible-node-selector-requirement":     d.K8sPlugin.InterruptibleNodeSelectorRequirement,
		"non-interruptible-node-selector-requirement": d.K8sPlugin.NonInterruptibleNodeSelectorRequirement,
		"tasks.task-plugins.default-for-task-types":   d.TaskPlugins,
	} {
		if !reflect.ValueOf(v).IsNil() {
			t.Errorf("%s = %v, want none", what, v)
		}
	}
	eq(t, "storage", d.Storage, config.StorageConfig{
		Type:   "stow",
		Stow:   config.StowConfig{Kind: "s3", Config: map[string]string{"region": "us-east-1"}},
		Limits: config.StorageLimits{GetLimitMegabytes: 2},
	})
	eq(t, "plugins.logs", d.TaskLogs, config.TaskLogConfig{
		IsKubernetesEnabled:   true,
		KubernetesTemplateURI: "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
	})
}

// writeFiles writes name → body into a new directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// --config takes a glob pattern; its files are merged in lexical order: later
// files win per key, mappings merge, lists and other values replace, a null
// leaves the default.
func TestConfigGlob(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"000-a.yaml": "executor:\n  cluster: a\n  maxSystemFailures: 7\n  requeueDuration: 5s\n  gc:\n    interval: 2h\n" +
			"plugins:\n  k8s:\n    default-env-vars:\n    - A: \"1\"\n    - B: \"2\"\n    default-labels:\n      team: a\n",
		"001-b.yaml": "executor:\n  Cluster: b\n  requeueDuration:\n  gc:\n    maxTTL: 3h\n" +
			"plugins:\n  k8s:\n    default-env-vars:\n    - C: \"3\"\n    default-labels:\n      tier: b\n",
		"002-c.txt": "executor:\n  cluster: not-read\n", // not matched by *.yaml
	})
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o700); err != nil { // a directory is not a file
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(dir, "*.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "cluster (later file, another case)", c.Cluster, "b")
	eq(t, "maxSystemFailures (only in the first)", c.MaxSystemFailures, 7)
	eq(t, "requeueDuration (null in the later file: the default)", c.RequeueDuration.Duration, 10*time.Second)
	eq(t, "gc (merged)", c.GC, config.GCConfig{Interval: config.Duration{Duration: 2 * time.Hour}, MaxTTL: config.Duration{Duration: 3 * time.Hour}})
	eq(t, "env vars (the later list replaces)", c.K8sPlugin.DefaultEnvVars, map[string]string{"C": "3"})
	eq(t, "labels (mappings merge)", c.K8sPlugin.DefaultLabels, map[string]string{"team": "a", "tier": "b"})

	// A plain path is one file, as before.
	c, err = config.Load(filepath.Join(dir, "000-a.yaml"), nil)
	if err != nil || c.Cluster != "a" {
		t.Errorf("plain path: cluster %q, %v", c.Cluster, err)
	}
	// A pattern that matches no file is an error, not the defaults.
	pattern := filepath.Join(dir, "*.yml")
	if _, err := config.Load(pattern, nil); err == nil || err.Error() != "config file pattern "+pattern+": no file matches it" {
		t.Errorf("no match: %v", err)
	}
	if _, err := config.Load(filepath.Join(dir, "[.yaml"), nil); err == nil || !strings.Contains(err.Error(), "syntax error in pattern") {
		t.Errorf("bad pattern: %v", err)
	}
}

// An error names the file the bad value came from.
func TestConfigGlobErrorNamesTheFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"000-a.yaml": "executor:\n  requeueDuration: soon\n  gc:\n    interval: [1h]\n",
		"001-b.yaml": "executor:\n  requeueDuration: 5s\n  gc:\n    maxTTL: 2h\n",
		"002-c.yaml": "executor:\n  gcc: {}\n",
	})
	// The later file's value replaces the bad one, so only gc.interval is wrong.
	_, err := config.Load(filepath.Join(dir, "00[01]-*.yaml"), nil)
	want := "config file " + filepath.Join(dir, "000-a.yaml") + `: gc.interval: a duration must be a string such as "90s" or "30m" (or a number of nanoseconds)`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	_, err = config.Load(filepath.Join(dir, "*.yaml"), nil)
	want = "config file " + filepath.Join(dir, "002-c.yaml") + `: unknown key "gcc" in section executor (did you mean "gc"?)`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// A mapping or list in the file replaces the default one (Flyte's ZeroFields);
// an empty mapping is no value at all for Flyte's loader, so it keeps the
// default, and an empty list clears it.
func TestMapsReplaceDefaults(t *testing.T) {
	for _, tc := range []struct {
		body string
		want map[string]string
	}{
		{"plugins:\n  k8s:\n    default-annotations:\n      team: a\n", map[string]string{"team": "a"}},
		{"plugins:\n  k8s:\n    default-annotations:\n    - team: a\n    - Owner: b\n", map[string]string{"team": "a", "Owner": "b"}},
		{"plugins:\n  k8s:\n    default-annotations: {}\n", map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
		{"plugins:\n  k8s:\n    default-annotations:\n", map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
		{"plugins:\n  k8s:\n    default-annotations: []\n", map[string]string{}},
	} {
		c, err := config.Load(writeFile(t, tc.body), nil)
		if err != nil {
			t.Errorf("%q: %v", tc.body, err)
			continue
		}
		eq(t, tc.body, c.K8sPlugin.DefaultAnnotations, tc.want)
	}
	// The stow settings replace Flyte's default region too.
	c, err := config.Load(writeFile(t, "storage:\n  stow:\n    config:\n      endpoint: http://minio:9000\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "stow", c.Storage.Stow, config.StowConfig{Kind: "s3", Config: map[string]string{"endpoint": "http://minio:9000"}})
}

// Values as Flyte's loader converts them, key by key.
func TestWeakValues(t *testing.T) {
	body := `executor:
  LeaderElect: "true"
  maxSystemFailures: "0x5"
  kubeAPIQPS: "12.5"
  kubeAPIBurst: 2.9
  enableHTTP2: 1
  cluster: 42
  defaultCPU: 0.5
  defaultMemory: 1073741824
  namespaces: team-a,team-b
  imagePullGracePeriod: 90000000000
  podSecurity:
    allowedServiceAccounts:
      team-a: runner,builder
plugins:
  k8s:
    default-env-vars:
    - FLAG: true
    - N: 3
    default-tolerations:
      key: spot
      operator: Exists
      tolerationSeconds: "30"
    interruptible-node-selector-requirement:
      key: pool
      operator: In
      values: spot,preemptible
  logs:
    templates:
    - templateUris: http://a/{{ .podName }},http://b
      messageFormat: "2"
      showWhilePending: "1"
`
	c, err := config.Load(writeFile(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	secs := int64(30)
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"leaderElect", c.LeaderElect, true},
		{"maxSystemFailures (Go syntax)", c.MaxSystemFailures, 5},
		{"kubeAPIQPS", c.KubeAPIQPS, float32(12.5)},
		{"kubeAPIBurst (truncated)", c.KubeAPIBurst, 2},
		{"enableHTTP2", c.EnableHTTP2, true},
		{"cluster", c.Cluster, "42"},
		{"defaultCPU", c.DefaultCPU, "0.5"},
		{"defaultMemory", c.DefaultMemory, "1073741824"},
		{"namespaces", c.Namespaces, []string{"team-a", "team-b"}},
		{"imagePullGracePeriod (nanoseconds)", c.ImagePullGracePeriod.Duration, 90 * time.Second},
		{"allowedServiceAccounts", c.PodSecurity.AllowedServiceAccounts, config.ServiceAccounts{"team-a": {"runner", "builder"}}},
		{"env vars", c.K8sPlugin.DefaultEnvVars, map[string]string{"FLAG": "1", "N": "3"}},
		{"one toleration for a list", c.K8sPlugin.DefaultTolerations, []corev1.Toleration{{Key: "spot", Operator: "Exists", TolerationSeconds: &secs}}},
		{"requirement values", c.K8sPlugin.InterruptibleNodeSelectorRequirement.Values, []string{"spot", "preemptible"}},
		{"templateUris", c.TaskLogs.Templates[0].TemplateURIs, []string{"http://a/{{ .podName }}", "http://b"}},
		{"messageFormat", c.TaskLogs.Templates[0].MessageFormat, config.LogMessageFormat(2)},
		{"showWhilePending", c.TaskLogs.Templates[0].ShowWhilePending, true},
	} {
		eq(t, tc.what, tc.got, tc.want)
	}
}

// Every key of Flyte's executor section, spelt as Flyte's executor spells it
// and set to Flyte's defaults, is a key of ours: the strict check refuses none.
func TestFlyteExecutorKeys(t *testing.T) {
	body := `executor:
  metricsBindAddress: ":10254"
  healthProbeBindAddress: ":8081"
  leaderElect: false
  metricsSecure: true
  webhookCertPath: ""
  webhookCertName: tls.crt
  webhookCertKey: tls.key
  metricsCertPath: ""
  metricsCertName: tls.crt
  metricsCertKey: tls.key
  enableHTTP2: false
  EventsServiceURL: http://localhost:8090
  cacheServiceURL: http://localhost:8094
  cluster: ""
  defaultK8sServiceAccount: ""
  maxSystemFailures: 3
  maxConcurrentReconciles: 512
  requeueDuration: 10s
  gc:
    interval: 30m
    maxTTL: 1h
`
	c, err := config.Load(writeFile(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.MaxConcurrentReconciles = 512 // Flyte's default; ours is 64
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
}
