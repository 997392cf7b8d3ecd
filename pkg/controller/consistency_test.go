package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/events"
)

// TestWriteOrder is issue 10, item 9: a cached copy is compared with our
// last write by resourceVersion order (numerically, not as strings), a newer
// copy is never held back, and nothing expires by time.
func TestWriteOrder(t *testing.T) {
	o := newWriteOrder()
	k := types.NamespacedName{Namespace: "n", Name: "a"}
	if o.behind(k, "1") {
		t.Error("behind without a write")
	}
	o.wrote(k, "10")
	for _, tc := range []struct {
		rv     string
		behind bool
	}{{"9", true}, {"2", true}, {"100", false}} {
		o.wrote(k, "10")
		if got := o.behind(k, tc.rv); got != tc.behind {
			t.Errorf("cache at %s after our write at 10: behind = %v, want %v", tc.rv, got, tc.behind)
		}
	}
	o.wrote(k, "12")
	o.wrote(k, "11") // a response that arrives late does not move the mark back
	if !o.behind(k, "11") || o.behind(k, "12") {
		t.Error("the mark is the newest write")
	}
	if o.behind(k, "11") {
		t.Error("once caught up, the entry is gone")
	}
	o.wrote(k, "12")
	if o.behind(k, "not-a-number") {
		t.Error("a version that cannot be ordered is trusted")
	}
	var nilOrder *writeOrder
	nilOrder.wrote(k, "1")
	if nilOrder.behind(k, "0") {
		t.Error("a nil order holds nothing back")
	}
}

func TestReleased(t *testing.T) {
	g := newReleased()
	k := types.NamespacedName{Namespace: "n", Name: "a"}
	g.add(k, "u1")
	if !g.has(k, "u1") || g.has(k, "u2") || g.has(k, "u1") {
		t.Error("a released object is recognised by UID; a new object of the name clears it")
	}
}

func TestSyncedPast(t *testing.T) {
	for _, tc := range []struct {
		synced, rv string
		want       bool
	}{{"10", "9", true}, {"10", "10", true}, {"9", "10", false}, {"", "10", false}, {"100", "99", true}} {
		if got := syncedPast(tc.synced, tc.rv); got != tc.want {
			t.Errorf("syncedPast(%q, %q) = %v", tc.synced, tc.rv, got)
		}
	}
}

func TestMetaPatch(t *testing.T) {
	ta := func(labels map[string]string, fins ...string) *flytev1.TaskAction {
		return &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Labels: labels, Finalizers: fins}}
	}
	for _, tc := range []struct {
		name     string
		old, new *flytev1.TaskAction
		want     string
	}{
		{"nothing", ta(nil, "f"), ta(nil, "f"), ""},
		{"add first finalizer", ta(nil), ta(nil, "f"), `add /metadata/finalizers [f]`},
		{"remove finalizer", ta(nil, "x", "f"), ta(nil, "x"), `test /metadata/finalizers [x f]; add /metadata/finalizers [x]`},
		{"labels onto none", ta(nil), ta(map[string]string{"a/b": "1"}), `add /metadata/labels map[a/b:1]`},
		{"escaped label key", ta(map[string]string{"team": "ml"}), ta(map[string]string{"team": "ml", "flyte.org/x~y": "v"}), `add /metadata/labels/flyte.org~1x~0y v`},
	} {
		var got []string
		for _, op := range metaPatch(tc.old, tc.new) {
			got = append(got, fmt.Sprintf("%s %s %v", op.Op, op.Path, op.Value))
		}
		if g := strings.Join(got, "; "); g != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, g, tc.want)
		}
	}
}

func TestHandledVersion(t *testing.T) {
	h := &handledVersion{}
	pod := func(rv string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}} }
	h.observe(pod("5"))
	h.observe(pod("12"))
	h.observe(pod("9")) // an older object handed out late does not move it back
	h.observe(cache.DeletedFinalStateUnknown{Obj: pod("3")})
	if got := h.get(); got != "12" {
		t.Errorf("handled version = %q, want 12", got)
	}
	h.observe(cache.DeletedFinalStateUnknown{Obj: pod("20")})
	if got := h.get(); got != "20" {
		t.Errorf("after a tombstone: %q, want 20", got)
	}
}

func TestAcknowledgedEvents(t *testing.T) {
	a := newAcknowledgedEvents()
	key := types.NamespacedName{Namespace: "ns", Name: "hello"}
	ev := events.Event{Action: "hello", Attempt: 1, Phase: events.PhaseQueued, Version: 1, LogContext: &core.LogContext{PrimaryPodName: "hello-0"}}
	a.add(key, "uid-1", []events.Event{ev})
	same := ev
	same.LogContext = &core.LogContext{PrimaryPodName: "hello-0"} // equal content, another message
	if !a.acknowledged(key, "uid-1", same) {
		t.Error("the same event is not recognised")
	}
	// A running pod's log context gains detail while its status is held
	// back: the identity was acknowledged, so it is not sent again with
	// other content under the same identity.
	detailed := ev
	detailed.LogContext = &core.LogContext{PrimaryPodName: "hello-0", Pods: []*core.PodLogContext{{PodName: "hello-0"}}}
	if !a.acknowledged(key, "uid-1", detailed) {
		t.Error("the same identity with other details would be sent again")
	}
	next := ev
	next.Version = 17
	if a.acknowledged(key, "uid-1", next) || a.acknowledged(key, "uid-2", ev) {
		t.Error("another version, or another TaskAction of the same name, taken as acknowledged")
	}
	a.forget(key)
	if a.acknowledged(key, "uid-1", ev) {
		t.Error("remembered after forget")
	}
}
