package task

import (
	"os"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// The Flyte-form sample holds real TaskTemplate bytes; its comment says what
// they decode to, and this keeps the two together.
func TestFlyteFormSample(t *testing.T) {
	b, err := os.ReadFile("../../config/samples/flyte_v1_taskaction_flyte_form.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ta := &flytev1.TaskAction{}
	if err := yaml.UnmarshalStrict(b, ta); err != nil {
		t.Fatal(err)
	}
	got, err := FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	want := &Container{
		Image:   "busybox:1.36",
		Command: []string{"sh", "-c", `echo "hello from Flyte's form, attempt $FLYTE_ATTEMPT_NUMBER of run $RUN_NAME, outputs under $1"`, "--"},
		Args:    []string{"{{.outputPrefix}}"},
	}
	if got.Form != FormFlyte || got.Type != "container" || got.Retries != 1 ||
		got.ID != (Identifier{Project: "flytesnacks", Domain: "development", Name: "hello.flyte", Version: "v1"}) {
		t.Errorf("task = %+v", got)
	}
	if !reflect.DeepEqual(got.Container.Command, want.Command) || !reflect.DeepEqual(got.Container.Args, want.Args) ||
		got.Container.Image != want.Image || !got.Container.Resources.Requests.Cpu().Equal(resource.MustParse("100m")) ||
		!got.Container.Resources.Requests.Memory().Equal(resource.MustParse("64Mi")) {
		t.Errorf("container = %+v", got.Container)
	}
}
