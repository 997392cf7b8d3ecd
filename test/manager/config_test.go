package manager

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// printedConfig runs `executor config` and returns the executor section.
func printedConfig(t *testing.T, args ...string) map[string]any {
	t.Helper()
	stdout, stderr, code := runCommand(t, append([]string{"config"}, args...)...)
	if code != 0 {
		t.Fatalf("executor config exited %d: %s", code, stderr)
	}
	var top map[string]map[string]any
	if err := yaml.Unmarshal([]byte(stdout), &top); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, stdout)
	}
	sec, ok := top["executor"]
	if !ok || len(top) != 1 {
		t.Fatalf("output has no single executor section:\n%s", stdout)
	}
	return sec
}

// lookup reads a dotted key; durations are compared parsed, so 30m and 30m0s agree.
func lookup(sec map[string]any, key string) (any, bool) {
	var cur any = sec
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func TestConfigPrintsEveryDefault(t *testing.T) {
	sec := printedConfig(t)
	cases := []struct {
		key  string
		want any
	}{
		{"metricsBindAddress", ":10254"},
		{"healthProbeBindAddress", ":8081"},
		{"leaderElect", false},
		{"metricsSecure", true},
		{"metricsCertPath", ""},
		{"metricsCertName", "tls.crt"},
		{"metricsCertKey", "tls.key"},
		{"webhookCertPath", ""},
		{"webhookCertName", "tls.crt"},
		{"webhookCertKey", "tls.key"},
		{"enableHTTP2", false},
		{"eventsServiceURL", "http://localhost:8090"},
		{"cacheServiceURL", "http://localhost:8094"},
		{"cluster", ""},
		{"defaultK8sServiceAccount", ""},
		{"maxSystemFailures", float64(3)},
		{"requeueDuration", 10 * time.Second},
		{"gc.interval", 30 * time.Minute},
		{"gc.maxTTL", time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			got, ok := lookup(sec, tc.key)
			if !ok {
				t.Fatalf("%s not printed", tc.key)
			}
			if d, isDur := tc.want.(time.Duration); isDur {
				s, _ := got.(string)
				pd, err := time.ParseDuration(s)
				if err != nil || pd != d {
					t.Errorf("%s = %v, want %v", tc.key, got, d)
				}
				return
			}
			if got != tc.want {
				t.Errorf("%s = %#v, want %#v", tc.key, got, tc.want)
			}
		})
	}
}

func TestConfigPrecedenceThroughTheBinary(t *testing.T) {
	file := filepath.Join(t.TempDir(), "executor.yaml")
	body := "executor:\n  cluster: from-file\n  maxSystemFailures: 5\n  gc:\n    maxTTL: 2h\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := printedConfig(t, "--config", file, "--executor.maxSystemFailures=9")
	if v, _ := lookup(sec, "cluster"); v != "from-file" {
		t.Errorf("cluster = %v, want from-file", v)
	}
	if v, _ := lookup(sec, "maxSystemFailures"); v != float64(9) {
		t.Errorf("maxSystemFailures = %v, want 9 (flag over file)", v)
	}
	if v, _ := lookup(sec, "gc.maxTTL"); v != "2h0m0s" {
		t.Errorf("gc.maxTTL = %v, want 2h0m0s", v)
	}
	if v, _ := lookup(sec, "gc.interval"); v != "30m0s" {
		t.Errorf("gc.interval = %v, want the default 30m0s", v)
	}
}

// The GC misconfiguration stops both the config command and the manager before
// anything starts, with one exact line on stderr.
func TestGCMisconfigurationExits1(t *testing.T) {
	file := filepath.Join(t.TempDir(), "executor.yaml")
	if err := os.WriteFile(file, []byte("executor:\n  gc:\n    interval: 10m\n    maxTTL: 0s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const zero, negative = "gc.maxTTL must be positive when gc is enabled", "gc.maxTTL must be positive when gc is enabled"
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"config, flag", []string{"config", "--executor.gc.maxTTL=0s"}, zero},
		{"config, file", []string{"config", "--config", file}, zero},
		{"manager, flag", []string{"--kubeconfig", kubeconfig, "--executor.gc.maxTTL=-1m"}, negative},
		{"manager, file", []string{"--kubeconfig", kubeconfig, "--config", file}, zero},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCommand(t, tc.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if want := fmt.Sprintf("error: invalid configuration: %s\n", tc.msg); stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

func TestConfigRejectsBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "executor.yaml")
	if err := os.WriteFile(file, []byte("executor:\n  gc:\n    ttl: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown nested key", []string{"config", "--config", file}, `unknown key "gc.ttl"`},
		{"unparsable duration flag", []string{"config", "--executor.requeueDuration=soon"}, "executor.requeueDuration"},
		{"negative maxSystemFailures", []string{"config", "--executor.maxSystemFailures=-1"}, "maxSystemFailures: must be between 0 and 100, got -1"},
		{"malformed URL", []string{"config", "--executor.cacheServiceURL=cache:8094"}, "cacheServiceURL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCommand(t, tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tc.want)
			}
		})
	}
}
