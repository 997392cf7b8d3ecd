package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/config/configtest"
)

// The documented defaults (README.md, Configuration keys); a change here is a change of behaviour.
func TestDefaults(t *testing.T) {
	d := config.Default()
	cases := []struct {
		key       string
		got, want any
	}{
		{"metricsBindAddress", d.MetricsBindAddress, ":10254"},
		{"healthProbeBindAddress", d.HealthProbeBindAddress, ":8081"},
		{"pprofBindAddress", d.PprofBindAddress, "0"},
		{"leaderElect", d.LeaderElect, false},
		{"leaderElectionNamespace", d.LeaderElectionNamespace, ""},
		{"metricsSecure", d.MetricsSecure, true},
		{"metricsCertPath", d.MetricsCertPath, ""},
		{"metricsCertName", d.MetricsCertName, "tls.crt"},
		{"metricsCertKey", d.MetricsCertKey, "tls.key"},
		{"webhookPort", d.WebhookPort, 9443},
		{"webhookCertPath", d.WebhookCertPath, ""},
		{"webhookCertName", d.WebhookCertName, "tls.crt"},
		{"webhookCertKey", d.WebhookCertKey, "tls.key"},
		{"enableHTTP2", d.EnableHTTP2, false},
		{"eventsServiceURL", d.EventsServiceURL, "http://localhost:8090"},
		{"cacheServiceURL", d.CacheServiceURL, "http://localhost:8094"},
		{"cluster", d.Cluster, ""},
		{"namespaces", len(d.Namespaces), 0},
		{"defaultK8sServiceAccount", d.DefaultK8sServiceAccount, ""},
		{"defaultCPU", d.DefaultCPU, "1"},
		{"defaultMemory", d.DefaultMemory, "1Gi"},
		{"imagePullGracePeriod", d.ImagePullGracePeriod.Duration, 3 * time.Minute},
		{"createContainerGracePeriod", d.CreateContainerGracePeriod.Duration, 3 * time.Minute},
		{"queuedStatusDelay", d.QueuedStatusDelay.Duration, 5 * time.Second},
		{"saturatedStatusDelay", d.SaturatedStatusDelay.Duration, 5 * time.Minute},
		{"executingStatusDelay", d.ExecutingStatusDelay.Duration, 5 * time.Minute},
		{"maxSystemFailures", d.MaxSystemFailures, 3},
		{"maxConcurrentReconciles", d.MaxConcurrentReconciles, 64},
		{"requeueDuration", d.RequeueDuration.Duration, 10 * time.Second},
		{"kubeAPIQPS", d.KubeAPIQPS, float32(100)},
		{"kubeAPIBurst", d.KubeAPIBurst, 200},
		{"kubeAPICompression", d.KubeAPICompression, false},
		{"gc.interval", d.GC.Interval.Duration, 30 * time.Minute},
		{"gc.maxTTL", d.GC.MaxTTL.Duration, time.Hour},
		{"podSecurity.level", d.PodSecurity.Level, "baseline"},
		{"podSecurity.allowedServiceAccounts", len(d.PodSecurity.AllowedServiceAccounts), 0},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("default %s = %v, want %v", tc.key, tc.got, tc.want)
			}
		})
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	// Load with nothing given must be exactly the defaults.
	c, err := config.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, d) {
		t.Errorf("Load(\"\", nil) = %+v, want the defaults %+v", c, d)
	}
}

// Every key has a flag whose default is the key's default, so --help tells the truth.
func TestEveryKeyHasAFlag(t *testing.T) {
	d := config.Default()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.BindFlags(fs, &d)
	js, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	keys := flatten("", m)
	if len(keys) == 0 {
		t.Fatal("no keys")
	}
	for k, v := range keys {
		f := fs.Lookup("executor." + k)
		if f == nil {
			t.Errorf("no flag --executor.%s", k)
			continue
		}
		if f.DefValue != v {
			t.Errorf("--executor.%s default %q, config default %q", k, f.DefValue, v)
		}
	}
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	if n != len(keys) {
		t.Errorf("%d flags for %d keys", n, len(keys))
	}
}

func flatten(prefix string, m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		sub, isMap := v.(map[string]any)
		if isMap && len(sub) > 0 {
			for sk, sv := range flatten(prefix+k+".", sub) {
				out[sk] = sv
			}
			continue
		}
		if isMap { // an empty mapping (allowedServiceAccounts): its flag's default is ""
			out[prefix+k] = ""
			continue
		}
		if v == nil { // no list (namespaces): its flag's default is ""
			out[prefix+k] = ""
			continue
		}
		b, _ := yaml.Marshal(v)
		out[prefix+k] = strings.Trim(strings.TrimSpace(string(b)), `"`)
	}
	return out
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load parses args as the binary would and loads with the file.
func load(t *testing.T, file string, args ...string) (config.Config, error) {
	t.Helper()
	fs, path, err := parse(t, file, args...)
	if err != nil {
		return config.Config{}, err
	}
	return config.Load(path, fs)
}

// loadPath is load that also returns the file's path.
func loadPath(t *testing.T, file string, args ...string) (string, error) {
	t.Helper()
	fs, path, err := parse(t, file, args...)
	if err != nil {
		return path, err
	}
	_, err = config.Load(path, fs)
	return path, err
}

func parse(t *testing.T, file string, args ...string) (*pflag.FlagSet, string, error) {
	t.Helper()
	d := config.Default()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", "", "")
	config.BindFlags(fs, &d)
	path := ""
	if file != "" {
		path = writeFile(t, file)
	}
	return fs, path, fs.Parse(args)
}

func TestPrecedence(t *testing.T) {
	const file = `
executor:
  cluster: from-file
  maxSystemFailures: 5
  requeueDuration: 12s
  leaderElect: true
  gc:
    maxTTL: 2h
`
	cases := []struct {
		name  string
		file  string
		args  []string
		check func(config.Config) []string
	}{
		{"defaults only", "", nil, func(c config.Config) []string {
			return diffs(c.Cluster == "" && c.MaxSystemFailures == 3 && c.RequeueDuration.Duration == 10*time.Second)
		}},
		{"file over defaults", file, nil, func(c config.Config) []string {
			return diffs(c.Cluster == "from-file", c.MaxSystemFailures == 5, c.RequeueDuration.Duration == 12*time.Second,
				c.LeaderElect, c.GC.MaxTTL.Duration == 2*time.Hour,
				// Keys the file does not name keep their defaults, also inside gc.
				c.GC.Interval.Duration == 30*time.Minute, c.MetricsBindAddress == ":10254")
		}},
		{"flags over file", file, []string{
			"--executor.cluster=from-flag", "--executor.maxSystemFailures=7", "--executor.requeueDuration=5s",
			"--executor.leaderElect=false", "--executor.gc.maxTTL=3h",
		}, func(c config.Config) []string {
			return diffs(c.Cluster == "from-flag", c.MaxSystemFailures == 7, c.RequeueDuration.Duration == 5*time.Second,
				!c.LeaderElect, c.GC.MaxTTL.Duration == 3*time.Hour)
		}},
		{"flag equal to the default still beats the file", file, []string{"--executor.maxSystemFailures=3"}, func(c config.Config) []string {
			return diffs(c.MaxSystemFailures == 3, c.Cluster == "from-file")
		}},
		{"flags over defaults without a file", "", []string{"--executor.metricsBindAddress=:9999", "--executor.kubeAPIQPS=12.5"}, func(c config.Config) []string {
			return diffs(c.MetricsBindAddress == ":9999", c.KubeAPIQPS == 12.5)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.file, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range tc.check(c) {
				t.Errorf("%s; config %+v", d, c)
			}
		})
	}
}

func diffs(oks ...bool) []string {
	var out []string
	for i, ok := range oks {
		if !ok {
			out = append(out, "check "+string(rune('0'+i))+" failed")
		}
	}
	return out
}

// Every row of the bad-configuration matrix, with its exact message.
func TestMatrix(t *testing.T) {
	for _, tc := range configtest.Matrix(configtest.NewCerts(t)) {
		t.Run(tc.Name, func(t *testing.T) {
			path, err := loadPath(t, tc.File, tc.Args...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			want := strings.ReplaceAll(tc.Want, configtest.FilePlaceholder, path)
			if got != want {
				t.Errorf("args %q, file %q:\n got %q\nwant %q", tc.Args, tc.File, got, want)
			}
		})
	}
}

// Validation problems are typed, so a caller can list them.
func TestValidationErrorLists(t *testing.T) {
	c := config.Default()
	c.MaxSystemFailures = -1
	c.RequeueDuration = config.Duration{Duration: time.Hour}
	var ve *config.ValidationError
	if err := c.Validate(); !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want a *ValidationError", err)
	}
	var keys []string
	for _, p := range ve.Problems {
		keys = append(keys, p.Key)
	}
	if strings.Join(keys, ",") != "maxSystemFailures,requeueDuration" {
		t.Errorf("keys %v", keys)
	}
}

// A Flyte deployment's spelling lands in our key.
func TestFlyteSpelling(t *testing.T) {
	c, err := load(t, "executor:\n  EventsServiceURL: http://flyte-http.flyte:8090\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.EventsServiceURL != "http://flyte-http.flyte:8090" {
		t.Errorf("eventsServiceURL = %q", c.EventsServiceURL)
	}
	// A flag (our spelling) still wins over the file (Flyte's).
	c, err = load(t, "executor:\n  EventsServiceURL: http://a:1\n", "--executor.eventsServiceURL=http://b:2")
	if err != nil || c.EventsServiceURL != "http://b:2" {
		t.Errorf("got %q, %v", c.EventsServiceURL, err)
	}
}

func TestPodSecurityFlagAndFileAgree(t *testing.T) {
	want := config.ServiceAccounts{"team-a": {"runner", "builder"}, "*": {"default"}}
	fromFlag, err := load(t, "", "--executor.podSecurity.allowedServiceAccounts=team-a=runner,team-a=builder,*=default")
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := load(t, "executor:\n  podSecurity:\n    allowedServiceAccounts:\n      team-a: [runner, builder]\n      \"*\": [default]\n")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]config.Config{"flag": fromFlag, "file": fromFile} {
		if !reflect.DeepEqual(c.PodSecurity.AllowedServiceAccounts, want) {
			t.Errorf("%s: %v, want %v", name, c.PodSecurity.AllowedServiceAccounts, want)
		}
		p, err := c.PodSecurity.Policy()
		if err != nil || p.Level() != "baseline" {
			t.Errorf("%s: policy %v, %v", name, p, err)
		}
	}
	// The flag form round-trips through String, which Load relies on.
	var back config.ServiceAccounts
	if err := back.Set(want.String()); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("round trip of %q: %v, %v", want.String(), back, err)
	}
}

func TestNamespacesFlagAndFileAgree(t *testing.T) {
	want := []string{"team-a", "team-b"}
	fromFlag, err := load(t, "", "--executor.namespaces=team-a, team-b")
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := load(t, "executor:\n  namespaces: [team-a, team-b]\n")
	if err != nil {
		t.Fatal(err)
	}
	// The flag beats the file, as every flag does.
	overFile, err := load(t, "executor:\n  namespaces: [other]\n", "--executor.namespaces=team-a,team-b")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]config.Config{"flag": fromFlag, "file": fromFile, "flag over file": overFile} {
		if !reflect.DeepEqual(c.Namespaces, want) {
			t.Errorf("%s: %q, want %q", name, c.Namespaces, want)
		}
	}
	// An empty flag is every namespace, as the default.
	c, err := load(t, "executor:\n  namespaces: [other]\n", "--executor.namespaces=")
	if err != nil || c.Namespaces != nil {
		t.Errorf("empty flag: %q, %v; want none", c.Namespaces, err)
	}
	// So is an empty list in the file (what `executor config` prints for none).
	c, err = load(t, "executor:\n  namespaces: []\n")
	if err != nil || c.Namespaces != nil {
		t.Errorf("empty list in the file: %q, %v; want none", c.Namespaces, err)
	}
}

func TestEmptyValuesKeepDefaults(t *testing.T) {
	t.Run("empty duration keeps the default", func(t *testing.T) {
		c, err := load(t, "executor:\n  requeueDuration:\n")
		if err != nil || c.RequeueDuration.Duration != 10*time.Second {
			t.Errorf("got %v, %v", c.RequeueDuration, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
		if err == nil || !strings.Contains(err.Error(), "config file") {
			t.Errorf("got %v", err)
		}
	})
}

// YAML output is what `executor config` prints; it must load back to the same Config.
func TestYAMLRoundTrip(t *testing.T) {
	c, err := load(t, "", "--executor.cluster=c1", "--executor.gc.interval=0s", "--executor.kubeAPIQPS=7.5")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"executor:", "cluster: c1", "interval: 0s", "requeueDuration: 10s", "maxTTL: 1h0m0s", "namespaces: []"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("YAML lacks %q:\n%s", w, out)
		}
	}
	back, err := config.Load(writeFile(t, string(out)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, c)
	}
}

func TestEmptyFileAndSection(t *testing.T) {
	for _, body := range []string{"", "executor:\n", "executor: {}\n"} {
		c, err := config.Load(writeFile(t, body), nil)
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if !reflect.DeepEqual(c, config.Default()) {
			t.Errorf("%q: not the defaults", body)
		}
	}
}

func TestFlytePodDefaultsAndTaskPlugins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flyte.yaml")
	body := `plugins:
  k8s:
    default-env-vars:
      _U_USE_ACTIONS: "1"
    default-annotations:
      cluster-autoscaler.kubernetes.io/safe-to-evict: "false"
    interruptible-tolerations:
    - key: spot
      operator: Exists
    gpu-resource-name: amd.com/gpu
tasks:
  task-plugins:
    enabled-plugins: [container, sidecar]
    default-for-task-types:
      python: container
      spark: spark
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := c.K8sPlugin
	if k.DefaultEnvVars["_U_USE_ACTIONS"] != "1" || k.DefaultAnnotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" ||
		len(k.InterruptibleTolerations) != 1 || k.InterruptibleTolerations[0].Key != "spot" || k.GPUResourceName != "amd.com/gpu" {
		t.Errorf("plugins.k8s = %+v", k)
	}
	if c.TaskPlugins["python"] != "container" || c.TaskPlugins["spark"] != "spark" {
		t.Errorf("task plugins = %v", c.TaskPlugins)
	}

	if err := os.WriteFile(path, []byte("plugins:\n  k8s:\n    default-env-vars:\n      1BAD: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(path, nil)
	if want := `plugins.k8s.default-env-vars: "1BAD": not an environment variable name`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}
