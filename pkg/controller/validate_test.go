package controller

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// read is newTA(0) as the informer reads it after a client stored, in the
// place of one of its values, what the Go types cannot hold.
func read(t *testing.T, mutate func(obj map[string]any)) *flytev1.TaskAction {
	t.Helper()
	b, err := json.Marshal(newTA(0))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	mutate(obj)
	if b, err = json.Marshal(obj); err != nil {
		t.Fatal(err)
	}
	ta := &flytev1.TaskAction{}
	if err := json.Unmarshal(b, ta); err != nil {
		t.Fatalf("the read failed (it must not, whatever a value holds): %v", err)
	}
	if ta.DecodeError() == nil {
		t.Fatal("no decode error recorded")
	}
	return ta
}

func field(obj map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := obj[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[p] = next
		}
		obj = next
	}
	return obj
}

// A TaskAction with a value that could not be read fails alone, with
// InvalidSpec naming the value, launches nothing, and is let go when it is
// deleted; one that had already ended stays as it is.
func TestUndecodableTaskActionFailsAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(map[string]any)
		path   string
	}{
		{"huge exponent in the typed resources", func(o map[string]any) {
			field(o, "spec", "template", "container", "resources")["limits"] = map[string]any{"cpu": "1e2147483648"}
		}, "spec.template.container.resources.limits.cpu"},
		{"not a quantity", func(o map[string]any) {
			field(o, "spec", "template", "container", "resources")["requests"] = map[string]any{"cpu": "lots"}
		}, "spec.template.container.resources.requests.cpu"},
		{"plugin state version beyond uint8", func(o map[string]any) { field(o, "status")["pluginStateVersion"] = 300 }, "status.pluginStateVersion"},
		{"negative attempts", func(o map[string]any) { field(o, "status")["attempts"] = -1 }, "status.attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := read(t, tc.mutate)
			p := testDecider.decide(worldOf(t, ta, resource{}), t0)
			c := meta.FindStatusCondition(p.Status.Conditions, flytev1.ConditionFailed)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flytev1.ReasonInvalidSpec || !strings.Contains(c.Message, tc.path) {
				t.Fatalf("Failed condition %+v, want InvalidSpec naming %s", c, tc.path)
			}
			if p.Launch || p.AddFinalizer {
				t.Errorf("launch %v, add finalizer %v", p.Launch, p.AddFinalizer)
			}
			if len(p.Events) != 1 || !strings.Contains(evs(p.Events), "FAILED") {
				t.Errorf("events %s, want one FAILED", evs(p.Events))
			}

			// Once it has ended, nothing more happens: the value that could
			// not be read is still there, and is not looked at again.
			ended := applied(ta, p)
			if again := testDecider.decide(worldOf(t, ended, resource{}), t0); len(again.Events) != 0 || again.WakeAfter != 0 ||
				!sameStatusJSON(again.Status, ended.Status) {
				t.Errorf("after its end: events %s, wake %v", evs(again.Events), again.WakeAfter)
			}

			// Deleted before or after its end: the finalizer is released.
			for _, d := range []*flytev1.TaskAction{ta.DeepCopy(), ended.DeepCopy()} {
				d.DeletionTimestamp = &metav1.Time{Time: t0.Add(5e9)}
				if p := testDecider.decide(worldOf(t, d, resource{}), t0.Add(6e9)); !p.RemoveFinalizer {
					t.Errorf("deleted: the finalizer is kept")
				}
			}
		})
	}
}

func sameStatusJSON(a, b flytev1.TaskActionStatus) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The message names what could not be read, and nothing the read left at
// zero (here the container the bad quantity was in is whole, but a template
// that failed to read entirely would look missing).
func TestSpecErrorOfAnUndecodableTaskActionNamesOnlyWhatDidNotDecode(t *testing.T) {
	ta := read(t, func(o map[string]any) {
		field(o, "spec")["runName"] = 5
		field(o, "spec")["template"] = "not an object"
	})
	err := specError(ta, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "spec.runName") || !strings.Contains(err.Error(), "spec.template") ||
		strings.Contains(err.Error(), "required spec fields are missing") {
		t.Errorf("specError = %v", err)
	}
}
