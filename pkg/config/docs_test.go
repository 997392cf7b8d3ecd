package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/taskaction/executor/pkg/config"
)

// The README's configuration table is the operators' reference; it must list
// every key with its real flag and default, and nothing else.
func TestConfigurationReferenceMatches(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ flag, def string }
	rows := map[string]row{}
	inKeys := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			inKeys = line == "### Configuration keys"
			continue
		}
		if !inKeys || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("short row %q", line)
		}
		unq := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		rows[unq(cells[1])] = row{flag: unq(cells[2]), def: unq(cells[3])}
	}

	d := config.Default()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.BindFlags(fs, &d)
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		n++
		key := strings.TrimPrefix(f.Name, "executor.")
		r, ok := rows[key]
		if !ok {
			t.Errorf("key %s is not documented", key)
			return
		}
		if r.flag != "--"+f.Name {
			t.Errorf("%s: documented flag %s, real --%s", key, r.flag, f.Name)
		}
		want := f.DefValue
		if f.Value.Type() == "duration" {
			got, err := time.ParseDuration(r.def)
			if err != nil || got.String() != want {
				t.Errorf("%s: documented default %q, real %s", key, r.def, want)
			}
			return
		}
		if r.def == `""` {
			r.def = ""
		}
		if r.def != want {
			t.Errorf("%s: documented default %q, real %q", key, r.def, want)
		}
	})
	if len(rows) != n {
		t.Errorf("%d documented keys, %d real ones", len(rows), n)
	}
}
