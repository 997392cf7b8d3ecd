package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/taskaction/executor/pkg/config"
)

const guide = "../../docs/flyte-deploy.md"

// guideBlock is the fenced block of the guide whose info string is "yaml <tag>".
func guideBlock(t testing.TB, tag string) string {
	t.Helper()
	b, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```yaml "+tag {
			continue
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		blocks = append(blocks, strings.Join(body, "\n"))
	}
	if len(blocks) != 1 {
		t.Fatalf("%s: want one ```yaml %s block, found %d", guide, tag, len(blocks))
	}
	return blocks[0]
}

// The guide's executor configuration (the chart values' config:, which the chart
// renders as the file) loads with the executor's own loader and holds what the
// guide says: flyte-binary's services, Flyte's namespace, storage, pod defaults
// and task types.
func TestGuideExecutorConfig(t *testing.T) {
	values := vals(t, guideBlock(t, "executor-values"))
	cfgTree, ok := values["config"]
	if !ok {
		t.Fatal("the guide's values have no config:")
	}
	cfg := loadTree(t, cfgTree)
	const flyteHTTP = "http://flyte-binary-http.flyte.svc:8090"
	if cfg.EventsServiceURL != flyteHTTP || cfg.CacheServiceURL != flyteHTTP {
		t.Errorf("eventsServiceURL %q, cacheServiceURL %q: want flyte-binary's http Service %s", cfg.EventsServiceURL, cfg.CacheServiceURL, flyteHTTP)
	}
	if !reflect.DeepEqual(cfg.Namespaces, []string{"flyte"}) {
		t.Errorf("namespaces %v, want [flyte]", cfg.Namespaces)
	}
	if cfg.Storage.Container != "my-organization-flyte-container" || cfg.Storage.PrimaryKind() != config.StowKindS3 ||
		cfg.Storage.Stow.Config["region"] != "us-east-1" || cfg.Storage.Stow.Config["auth_type"] != "iam" {
		t.Errorf("storage %+v", cfg.Storage)
	}
	if locs, err := cfg.Storage.AllowedLocations(); err != nil || len(locs) != 1 {
		t.Errorf("allowed locations %v, %v: want flyte-binary's bucket", locs, err)
	}
	wantEnv := map[string]string{"_U_EP_OVERRIDE": "flyte-binary-http.flyte:8090", "_U_INSECURE": "true", "_U_USE_ACTIONS": "1"}
	if !reflect.DeepEqual(cfg.K8sPlugin.DefaultEnvVars, wantEnv) {
		t.Errorf("plugins.k8s.default-env-vars %v, want %v", cfg.K8sPlugin.DefaultEnvVars, wantEnv)
	}
	if cfg.K8sPlugin.DefaultAnnotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" {
		t.Errorf("plugins.k8s.default-annotations %v: Flyte's default is kept", cfg.K8sPlugin.DefaultAnnotations)
	}
	if cfg.TaskLogs.IsKubernetesEnabled || cfg.TaskLogs.IsCloudwatchEnabled || cfg.TaskLogs.IsStackDriverEnabled {
		t.Errorf("plugins.logs %+v: flyte-binary's defaults turn every link off", cfg.TaskLogs)
	}
	if !reflect.DeepEqual(cfg.TaskPlugins, map[string]string{"container": "container", "sidecar": "sidecar"}) {
		t.Errorf("tasks.task-plugins.default-for-task-types %v", cfg.TaskPlugins)
	}
	if p, _ := values["webhook"].(map[string]any)["podSecrets"].(bool); !p {
		t.Error("the guide switches Flyte's pod webhook off, so the executor's must be on")
	}
}

// The guide's values for flyte-binary set Flyte's executor section with keys
// of that section (the executor's loader is strict about them, and each of
// Flyte's executor keys is one of its own), so a misspelt switch is caught.
func TestGuideFlyteValues(t *testing.T) {
	values := vals(t, guideBlock(t, "flyte-binary-values"))
	inline, ok := values["configuration"].(map[string]any)["inline"].(map[string]any)
	if !ok {
		t.Fatal("no configuration.inline")
	}
	cfg := loadTree(t, map[string]any{"executor": inline["executor"]})
	if !cfg.LeaderElect {
		t.Error("configuration.inline.executor.leaderElect is not true: Flyte's executor would run")
	}
	wh, _ := inline["webhook"].(map[string]any)
	if v, _ := wh["disableCreateMutatingWebhookConfig"].(bool); !v {
		t.Error("Flyte's pod webhook configuration is not switched off")
	}
}

// Every executor setting the guide names in the text (`executor.<key>`,
// `storage...`, `plugins.k8s...`, `plugins.logs...`, `tasks.task-plugins...`)
// is a key the executor reads.
func TestGuideNamesRealKeys(t *testing.T) {
	b, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[k] = true
	}
	for _, k := range flyteSectionKeys() {
		known[k] = true
	}
	prefixOfKnown := func(k string) bool {
		for kk := range known {
			if kk == k || strings.HasPrefix(kk, k+".") || strings.HasPrefix(k, kk+".") {
				return true
			}
		}
		return false
	}
	re := regexp.MustCompile("`((?:executor|storage|plugins\\.k8s|plugins\\.logs|tasks\\.task-plugins)(?:\\.[A-Za-z0-9_-]+)*)`")
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		k := m[1]
		if k == "executor" || strings.HasPrefix(k, "executor.Setup") {
			continue // the section itself; Flyte's function
		}
		n++
		if !prefixOfKnown(k) {
			t.Errorf("the guide names %s, which the executor does not read", k)
		}
	}
	if n < 5 {
		t.Fatalf("found only %d settings in the guide: the pattern is broken", n)
	}
}

func loadTree(t *testing.T, tree any) config.Config {
	t.Helper()
	b, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("config.Load: %v\n%s", err, b)
	}
	return cfg
}
