package spark

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/config"
)

func loadFile(t *testing.T, body string) config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLoadConfig: `plugins: spark:` in Flyte's keys, over Flyte's defaults
// (pod templates on, a 30 s probe timeout, the driver's Kubernetes dashboard
// link); a section the file does not hold leaves the defaults.
func TestLoadConfig(t *testing.T) {
	def, err := LoadConfig(loadFile(t, "executor: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !def.EnablePodTemplate || def.PodTemplateDetectionTimeout.Duration != 30*time.Second || !def.LogConfig.Mixed.IsKubernetesEnabled ||
		!strings.HasPrefix(def.LogConfig.Mixed.KubernetesTemplateURI, "http://localhost:30082/#!/log/") || def.LogConfig.User.IsKubernetesEnabled {
		t.Errorf("defaults %+v", def)
	}
	c, err := LoadConfig(loadFile(t, `plugins:
  spark:
    spark-config-default:
      - spark.driver.cores: "1"
      - spark.network.timeout: 600s
    spark-history-server-url: https://history.example.com
    features:
      - name: allow-s3
        spark-config:
          spark.hadoop.fs.s3a.impl: org.apache.hadoop.fs.s3a.S3AFileSystem
    enable-pod-template: false
    pod-template-detection-timeout: 5s
    logs:
      mixed:
        kubernetes-template-uri: https://dash/{{ .podName }}
      all-user:
        templates:
          - displayName: All
            templateUris: ["https://all/{{ .podName }}"]
`))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !maps.Equal(c.DefaultSparkConfig, map[string]string{"spark.driver.cores": "1", "spark.network.timeout": "600s"}):
		t.Errorf("spark-config-default %v", c.DefaultSparkConfig)
	case c.SparkHistoryServerURL != "https://history.example.com" || c.EnablePodTemplate || c.PodTemplateDetectionTimeout.Duration != 5*time.Second:
		t.Errorf("section %+v", c)
	case len(c.Features) != 1 || c.Features[0].Name != "allow-s3" || c.Features[0].SparkConfig["spark.hadoop.fs.s3a.impl"] == "":
		t.Errorf("features %+v", c.Features)
	case !c.LogConfig.Mixed.IsKubernetesEnabled || c.LogConfig.Mixed.KubernetesTemplateURI != "https://dash/{{ .podName }}":
		t.Errorf("mixed logs %+v: the default's kubernetes-enabled stays", c.LogConfig.Mixed)
	case len(c.LogConfig.AllUser.Templates) != 1:
		t.Errorf("all-user logs %+v", c.LogConfig.AllUser)
	}
}

// TestNewRefusesBadSections: a value of the wrong type names its key; a
// log link of an unknown type names the log configuration.
func TestNewRefusesBadSections(t *testing.T) {
	if _, err := New(loadFile(t, "plugins:\n  spark:\n    enable-pod-template: maybe\n")); err == nil || !strings.Contains(err.Error(), "plugins.spark.enable-pod-template") {
		t.Errorf("err %v; want it to name plugins.spark.enable-pod-template", err)
	}
	bad := "plugins:\n  spark:\n    logs:\n      system:\n        templates:\n          - templateUris: [x]\n            linkType: sideways\n"
	if _, err := New(loadFile(t, bad)); err == nil || !strings.Contains(err.Error(), "plugins.spark.logs.system") {
		t.Errorf("err %v; want it to name plugins.spark.logs.system", err)
	}
}
