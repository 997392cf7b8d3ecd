package ray

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// TestReadmeRayExample builds the README's hand-written Ray TaskAction (the
// typed form, config.rayJob) as a user would apply it: it must decode, and
// make the RayJob the README says.
func TestReadmeRayExample(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, after, ok := strings.Cut(readme, "A Ray task on a real cluster")
	if !ok {
		t.Fatal("README.md: no Ray example")
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("README.md: the Ray example has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	ta := &flytev1.TaskAction{}
	if err := yaml.UnmarshalStrict([]byte(block), ta); err != nil {
		t.Fatalf("the README's Ray TaskAction does not decode: %v", err)
	}
	ta.Namespace, ta.UID = "default", "uid-readme"
	job := mustBuild(t, ta, DefaultConfig())
	if job.Name != "ray-hello-0" || !strings.Contains(after, "`"+job.Name+"`") {
		t.Errorf("RayJob name %q; the README names another", job.Name)
	}
	spec := job.Spec.RayClusterSpec
	if spec == nil || len(spec.WorkerGroupSpecs) != 1 || spec.WorkerGroupSpecs[0].GroupName != "workers" ||
		spec.WorkerGroupSpecs[0].Replicas == nil || *spec.WorkerGroupSpecs[0].Replicas != 2 {
		t.Errorf("worker groups %+v; want one group \"workers\" of 2", spec)
	}
	if img := spec.HeadGroupSpec.Template.Spec.Containers[0].Image; img != "rayproject/ray:2.9.0" {
		t.Errorf("head image %q", img)
	}
}
