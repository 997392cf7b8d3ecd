package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/taskaction/executor/pkg/config"
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
		{"defaultK8sServiceAccount", d.DefaultK8sServiceAccount, ""},
		{"defaultCPU", d.DefaultCPU, "1"},
		{"defaultMemory", d.DefaultMemory, "1Gi"},
		{"imagePullGracePeriod", d.ImagePullGracePeriod.Duration, 3 * time.Minute},
		{"createContainerGracePeriod", d.CreateContainerGracePeriod.Duration, 3 * time.Minute},
		{"maxSystemFailures", d.MaxSystemFailures, 3},
		{"maxConcurrentReconciles", d.MaxConcurrentReconciles, 64},
		{"requeueDuration", d.RequeueDuration.Duration, 10 * time.Second},
		{"kubeAPIQPS", d.KubeAPIQPS, float32(100)},
		{"kubeAPIBurst", d.KubeAPIBurst, 200},
		{"gc.interval", d.GC.Interval.Duration, 30 * time.Minute},
		{"gc.maxTTL", d.GC.MaxTTL.Duration, time.Hour},
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
	if c != d {
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
		if sub, ok := v.(map[string]any); ok {
			for sk, sv := range flatten(prefix+k+".", sub) {
				out[sk] = sv
			}
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
	d := config.Default()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", "", "")
	config.BindFlags(fs, &d)
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	path := ""
	if file != "" {
		path = writeFile(t, file)
	}
	return config.Load(path, fs)
}

func TestPrecedence(t *testing.T) {
	const file = `
executor:
  cluster: from-file
  maxSystemFailures: 5
  requeueDuration: 20s
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
			return diffs(c.Cluster == "from-file", c.MaxSystemFailures == 5, c.RequeueDuration.Duration == 20*time.Second,
				c.LeaderElect, c.GC.MaxTTL.Duration == 2*time.Hour,
				// Keys the file does not name keep their defaults, also inside gc.
				c.GC.Interval.Duration == 30*time.Minute, c.MetricsBindAddress == ":10254")
		}},
		{"flags over file", file, []string{
			"--executor.cluster=from-flag", "--executor.maxSystemFailures=7", "--executor.requeueDuration=1m",
			"--executor.leaderElect=false", "--executor.gc.maxTTL=3h",
		}, func(c config.Config) []string {
			return diffs(c.Cluster == "from-flag", c.MaxSystemFailures == 7, c.RequeueDuration.Duration == time.Minute,
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

func TestInvalid(t *testing.T) {
	certDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		file string
		args []string
		want []string // substrings of the error; the first names the key
	}{
		{"gc enabled without maxTTL (file)", "executor:\n  gc:\n    interval: 5m\n    maxTTL: 0s\n", nil,
			[]string{"gc.maxTTL must be positive when gc is enabled"}},
		{"gc enabled without maxTTL (flag)", "", []string{"--executor.gc.maxTTL=0s"},
			[]string{"gc.maxTTL must be positive when gc is enabled"}},
		{"gc negative maxTTL", "", []string{"--executor.gc.maxTTL=-1h"},
			[]string{"gc.maxTTL must be positive when gc is enabled"}},
		{"negative gc interval", "", []string{"--executor.gc.interval=-1m"}, []string{"gc.interval", "negative"}},
		{"negative maxSystemFailures (file)", "executor:\n  maxSystemFailures: -1\n", nil, []string{"maxSystemFailures", "negative"}},
		{"negative maxSystemFailures (flag)", "", []string{"--executor.maxSystemFailures=-2"}, []string{"maxSystemFailures", "negative"}},
		{"negative requeueDuration", "executor:\n  requeueDuration: -5s\n", nil, []string{"requeueDuration", "negative"}},
		{"zero requeueDuration", "", []string{"--executor.requeueDuration=0s"}, []string{"requeueDuration", "positive"}},
		{"unparsable duration in file", "executor:\n  requeueDuration: soon\n", nil, []string{"requeueDuration", `invalid duration "soon"`}},
		{"unparsable nested duration in file", "executor:\n  gc:\n    interval: 5 minutes\n", nil, []string{"gc.interval", "invalid duration"}},
		{"number as duration in file", "executor:\n  gc:\n    maxTTL: 3600\n", nil, []string{"gc.maxTTL", "duration must be a string"}},
		{"unparsable duration flag", "", []string{"--executor.requeueDuration=soon"}, []string{"executor.requeueDuration", "invalid"}},
		{"unparsable nested duration flag", "", []string{"--executor.gc.interval=xyz"}, []string{"executor.gc.interval", "invalid"}},
		{"unknown key", "executor:\n  metricsBindAdress: \":1\"\n", nil, []string{`unknown key "metricsBindAdress"`}},
		{"unknown nested gc key", "executor:\n  gc:\n    ttl: 1h\n", nil, []string{`unknown key "gc.ttl"`}},
		{"key with wrong case", "executor:\n  LeaderElect: true\n", nil, []string{`unknown key "LeaderElect"`}},
		{"unknown section", "exeuctor:\n  leaderElect: true\n", nil, []string{`unknown section "exeuctor"`}},
		{"wrong type", "executor:\n  maxSystemFailures: three\n", nil, []string{"maxSystemFailures", "must be a int"}},
		{"gc not a mapping", "executor:\n  gc: 5m\n", nil, []string{"executor.gc must be a mapping"}},
		{"malformed eventsServiceURL", "", []string{"--executor.eventsServiceURL=localhost:8090"}, []string{"eventsServiceURL", "not an http(s) URL"}},
		{"eventsServiceURL without host", "executor:\n  eventsServiceURL: http://\n", nil, []string{"eventsServiceURL", "not an http(s) URL"}},
		{"malformed cacheServiceURL", "executor:\n  cacheServiceURL: \"http://exa mple\"\n", nil, []string{"cacheServiceURL", "not an http(s) URL"}},
		{"metricsCertPath without files", "", []string{"--executor.metricsCertPath=" + t.TempDir()}, []string{"metricsCertPath", "tls.crt", "not readable"}},
		{"metricsCertPath without key", "", []string{"--executor.metricsCertPath=" + certDir}, []string{"metricsCertPath", "tls.key", "not readable"}},
		{"metricsCertPath with other names", "", []string{"--executor.metricsCertPath=" + certDir, "--executor.metricsCertName=srv.crt"}, []string{"metricsCertPath", "srv.crt"}},
		{"webhookCertPath without files", "", []string{"--executor.webhookCertPath=" + t.TempDir()}, []string{"webhookCertPath", "not readable"}},
		{"bad bind address", "", []string{"--executor.healthProbeBindAddress=8081"}, []string{"healthProbeBindAddress", "host:port"}},
		{"bad webhookPort", "", []string{"--executor.webhookPort=70000"}, []string{"webhookPort"}},
		{"bad defaultCPU", "", []string{"--executor.defaultCPU=lots"}, []string{"defaultCPU", "quantity"}},
		{"zero maxConcurrentReconciles", "", []string{"--executor.maxConcurrentReconciles=0"}, []string{"maxConcurrentReconciles"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.file, tc.args...)
			if err == nil {
				t.Fatalf("accepted; want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	t.Run("gc message is exact", func(t *testing.T) {
		_, err := load(t, "", "--executor.gc.maxTTL=0s")
		if err == nil || err.Error() != "gc.maxTTL must be positive when gc is enabled" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("bare 0 disables gc in a file", func(t *testing.T) {
		c, err := load(t, "executor:\n  gc:\n    interval: 0\n    maxTTL: 0\n")
		if err != nil {
			t.Fatalf("rejected: %v", err)
		}
		if c.GC.Interval.Duration != 0 || c.GC.MaxTTL.Duration != 0 {
			t.Errorf("gc = %+v", c.GC)
		}
	})
	t.Run("empty duration keeps the default", func(t *testing.T) {
		c, err := load(t, "executor:\n  requeueDuration:\n")
		if err != nil || c.RequeueDuration.Duration != 10*time.Second {
			t.Errorf("got %v, %v", c.RequeueDuration, err)
		}
	})
	t.Run("gc disabled needs no maxTTL", func(t *testing.T) {
		if _, err := load(t, "", "--executor.gc.interval=0s", "--executor.gc.maxTTL=0s"); err != nil {
			t.Errorf("gc disabled rejected: %v", err)
		}
	})
	t.Run("every invalid key is reported", func(t *testing.T) {
		_, err := load(t, "", "--executor.maxSystemFailures=-1", "--executor.requeueDuration=-1s")
		if err == nil || !strings.Contains(err.Error(), "maxSystemFailures") || !strings.Contains(err.Error(), "requeueDuration") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
		if err == nil || !strings.Contains(err.Error(), "config file") {
			t.Errorf("got %v", err)
		}
	})
}

func TestCertPathWithFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := load(t, "", "--executor.metricsCertPath="+dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsCertPath != dir {
		t.Errorf("metricsCertPath = %q", c.MetricsCertPath)
	}
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
	for _, w := range []string{"executor:", "cluster: c1", "interval: 0s", "requeueDuration: 10s", "maxTTL: 1h0m0s"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("YAML lacks %q:\n%s", w, out)
		}
	}
	back, err := config.Load(writeFile(t, string(out)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if back != c {
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
		if c != config.Default() {
			t.Errorf("%q: not the defaults", body)
		}
	}
}
