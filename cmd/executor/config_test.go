package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskaction/executor/pkg/config/configtest"
)

// run executes the command tree with args, as main does, and returns what it
// printed and its error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// The dry run (`executor config`) and the real start answer every row of the
// bad-configuration matrix identically, with the row's exact message; for a
// valid row the dry run prints the configuration and the start goes on to the
// next step (reading the kubeconfig, which here does not exist), which shows
// that the start ran the validation and passed it.
func TestDryRunAndStartAgree(t *testing.T) {
	missingKubeconfig := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, tc := range configtest.Matrix(configtest.NewCerts(t)) {
		t.Run(tc.Name, func(t *testing.T) {
			args := tc.Args
			want := tc.Want
			if tc.File != "" {
				path := filepath.Join(t.TempDir(), "executor.yaml")
				if err := os.WriteFile(path, []byte(tc.File), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", path}, args...)
				want = strings.ReplaceAll(want, configtest.FilePlaceholder, path)
			}
			dryOut, dryErr := run(t, append([]string{"config"}, args...)...)
			_, startErr := run(t, append([]string{"--kubeconfig", missingKubeconfig}, args...)...)

			if tc.Want == "" {
				if dryErr != nil {
					t.Fatalf("dry run refused a valid configuration: %v", dryErr)
				}
				if !strings.HasPrefix(dryOut, "executor:\n") {
					t.Errorf("dry run printed %q", dryOut)
				}
				if startErr == nil || !strings.HasPrefix(startErr.Error(), "kubeconfig "+missingKubeconfig) {
					t.Errorf("start: %v; want it past validation, failing on the missing kubeconfig", startErr)
				}
				return
			}
			if dryErr == nil || startErr == nil {
				t.Fatalf("accepted: dry run %v, start %v; want %q", dryErr, startErr, want)
			}
			if dryErr.Error() != startErr.Error() {
				t.Errorf("they disagree:\ndry run %q\nstart   %q", dryErr, startErr)
			}
			// Flag syntax errors come from the flag parser, the rest from Load.
			if got := dryErr.Error(); got != "invalid configuration: "+want && got != want {
				t.Errorf("got  %q\nwant %q", got, "invalid configuration: "+want)
			}
		})
	}
}

// The other commands that read the configuration refuse it the same way.
func TestOtherCommandsValidate(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"local", []string{"local", "--data-dir", t.TempDir(), "--executor.requeueDuration=1h"},
			"invalid configuration: requeueDuration: must be at most 15s, got 1h0m0s: it is also the cache reservation heartbeat, and a reservation lapses 30s after its last renewal"},
		{"webhook", []string{"webhook", "--executor.maxConcurrentReconciles=0"},
			"invalid configuration: maxConcurrentReconciles: must be between 1 and 1024, got 0"},
		{"events list, configured URL", []string{"events", "list", "--run", "r", "--executor.eventsServiceURL=localhost:8090"},
			`invalid configuration: eventsServiceURL: "localhost:8090" has no scheme: write it as "http://localhost:8090" (or https)`},
		{"events list, --events-url", []string{"events", "list", "--run", "r", "--events-url", "localhost:8090"},
			`--events-url: "localhost:8090" has no scheme: write it as "http://localhost:8090" (or https)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// The files Flyte's charts render, passed as their deployment passes them
// (--config /etc/flyte/config.d/*.yaml): the dry run prints the
// configuration and the start gets past validation to the kubeconfig.
func TestFlyteChartConfigsStart(t *testing.T) {
	missingKubeconfig := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, tc := range []struct {
		chart string
		want  []string // lines the dry run prints
	}{
		{"flyte-binary", []string{"  eventsServiceURL: http://localhost:8090\n", "  maxConcurrentReconciles: 64\n"}},
		{"flyte-devbox", []string{"  leaderElect: false\n"}},
		{"flyte-binary-inline", []string{
			"  eventsServiceURL: http://flyte-flyte-binary-http.flyte:8090\n",
			"  maxConcurrentReconciles: 128\n", "  leaderElect: true\n", "    maxTTL: 24h0m0s\n"}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			pattern := filepath.Join("..", "..", "pkg", "config", "testdata", "flyte-charts", tc.chart, "*.yaml")
			out, err := run(t, "config", "--config", pattern)
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if !strings.HasPrefix(out, "executor:\n") {
				t.Errorf("dry run printed %q", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("dry run lacks %q:\n%s", w, out)
				}
			}
			_, err = run(t, "--kubeconfig", missingKubeconfig, "--config", pattern)
			if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig "+missingKubeconfig) {
				t.Errorf("start: %v; want it past validation, failing on the missing kubeconfig", err)
			}
		})
	}
}

// A pattern that matches nothing stops the dry run and the start alike.
func TestConfigPatternWithoutFiles(t *testing.T) {
	pattern := filepath.Join(t.TempDir(), "*.yaml")
	want := "invalid configuration: config file pattern " + pattern + ": no file matches it"
	for _, args := range [][]string{{"config", "--config", pattern}, {"--kubeconfig", "x", "--config", pattern}} {
		if _, err := run(t, args...); err == nil || err.Error() != want {
			t.Errorf("%v: %v, want %s", args, err, want)
		}
	}
}
