package e2e

import (
	"strings"
	"testing"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/setup"
)

// Setup builds the reconciler's blob store and log-link renderer from the
// storage and plugins.logs sections: one it cannot build stops the start with
// its error (nothing is dialled to find out).
func TestSetupBuildsStorageAndTaskLogs(t *testing.T) {
	base := func() config.Config {
		c := config.Default()
		c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
		return c
	}
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"unknown storage type", func(c *config.Config) { c.Storage.Type = "ftp" }, `storage.type "ftp"`},
		{"unknown stow kind", func(c *config.Config) { c.Storage.Stow.Kind = "dropbox" }, `"dropbox"`},
		{"log template of an unknown link type", func(c *config.Config) {
			c.TaskLogs.Templates = []config.TaskLogTemplate{{DisplayName: "x", TemplateURIs: []string{"https://x/{{ .podName }}"}, LinkType: "telepathy"}}
		}, `plugins.logs.templates[0].linkType "telepathy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			_, err := setup.Setup(c, env.Config, setup.Options{Namespaces: []string{"none"}, SkipNameValidation: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Setup: %v, want an error naming %q", err, tc.want)
			}
		})
	}
	if _, err := setup.Setup(base(), env.Config, setup.Options{Namespaces: []string{"none"}, SkipNameValidation: true}); err != nil {
		t.Fatalf("Setup with the default storage and logs sections: %v", err)
	}
}
