package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginSection: an engine plugin's own section under plugins: is kept
// as the files hold it and decoded by its plugin as Flyte's loader would
// (keys in any case, weak values), over the plugin's defaults; errors name
// the key; a missing section leaves the defaults.
func TestPluginSection(t *testing.T) {
	type rayConfig struct {
		ShutdownAfterJobFinishes bool              `json:"shutdownAfterJobFinishes"`
		TTLSecondsAfterFinished  int32             `json:"ttlSecondsAfterFinished"`
		Dashboard                string            `json:"dashboardHost"`
		Env                      map[string]string `json:"defaultEnvVars"`
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	body := "plugins:\n  Ray:\n    shutdownafterjobfinishes: \"true\"\n    ttlSecondsAfterFinished: \"600\"\n    defaultEnvVars:\n      - A: x\n      - B: y\n  k8s:\n    default-env-vars:\n      - C: z\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := rayConfig{Dashboard: "default-host", TTLSecondsAfterFinished: 3600}
	if err := c.PluginSection("ray", &got); err != nil {
		t.Fatal(err)
	}
	if !got.ShutdownAfterJobFinishes || got.TTLSecondsAfterFinished != 600 || got.Dashboard != "default-host" || got.Env["A"] != "x" || got.Env["B"] != "y" {
		t.Errorf("decoded %+v", got)
	}
	if _, ok := c.PluginSections["k8s"]; ok || c.K8sPlugin.DefaultEnvVars["C"] != "z" {
		t.Errorf("plugins.k8s is read as before, not kept as another section: %v", c.PluginSections)
	}
	none := rayConfig{TTLSecondsAfterFinished: 7}
	if err := c.PluginSection("spark", &none); err != nil || none.TTLSecondsAfterFinished != 7 {
		t.Errorf("a section the files do not hold: %+v, %v", none, err)
	}
	c.PluginSections["ray"] = map[string]any{"ttlSecondsAfterFinished": "soon"}
	if err := c.PluginSection("ray", &got); err == nil || !strings.Contains(err.Error(), "plugins.ray.ttlSecondsAfterFinished") {
		t.Errorf("error %v; want it to name plugins.ray.ttlSecondsAfterFinished", err)
	}
}
