package plugin

import (
	"context"
	"reflect"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

type fakePlugin struct {
	id    string
	types []string
}

func (f fakePlugin) ID() string                      { return f.id }
func (f fakePlugin) TaskTypes() []string             { return f.types }
func (f fakePlugin) ResourceName(TaskContext) string { return "" }
func (f fakePlugin) WatchedTypes() []client.Object   { return nil }
func (f fakePlugin) Launch(context.Context, client.Client, TaskContext) error {
	return nil
}
func (f fakePlugin) Observe(context.Context, client.Reader, TaskContext) (Observation, error) {
	return Observation{}, nil
}
func (f fakePlugin) Abort(context.Context, client.Client, TaskContext) error    { return nil }
func (f fakePlugin) Finalize(context.Context, client.Client, TaskContext) error { return nil }

func TestRegistryMapTaskTypes(t *testing.T) {
	r := NewRegistry()
	pod := fakePlugin{id: "container", types: []string{"container", "python"}}
	spark := fakePlugin{id: "spark", types: []string{"spark"}}
	for _, p := range []Plugin{pod, spark} {
		if err := r.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(fakePlugin{id: "other", types: []string{"python"}}); err == nil {
		t.Error("a task type claimed twice registered")
	}
	unknown := r.MapTaskTypes(map[string]string{"sidecar": "container", "python": "spark", "container_array": "k8s-array", "x": "nope"})
	if want := []string{"container_array: k8s-array", "x: nope"}; !reflect.DeepEqual(unknown, want) {
		t.Errorf("unknown = %v, want %v", unknown, want)
	}
	for taskType, want := range map[string]string{"sidecar": "container", "python": "spark", "container": "container", "spark": "spark"} {
		p, err := r.Resolve(taskType)
		if err != nil || p.ID() != want {
			t.Errorf("Resolve(%q) = %v, %v; want %s", taskType, p, err, want)
		}
	}
	if _, err := r.Resolve("container_array"); err == nil {
		t.Error("an unknown plugin's task type resolved without a default")
	}
	r.SetDefault(pod)
	if p, err := r.Resolve("anything"); err != nil || p.ID() != "container" {
		t.Errorf("default = %v, %v", p, err)
	}
}
