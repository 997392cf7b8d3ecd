package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/events"
)

func TestReleasedTaskActions(t *testing.T) {
	g := newReleasedTaskActions()
	k := types.NamespacedName{Namespace: "n", Name: "a"}
	g.add(k, "u1")
	if !g.has(k, "u1") || g.has(k, "u2") || g.has(k, "u1") {
		t.Error("a released object is recognised by UID; a new object of the name clears it")
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

func TestSaturationHolds(t *testing.T) {
	h := newSaturationHolds()
	a, b := types.NamespacedName{Namespace: "n", Name: "a"}, types.NamespacedName{Namespace: "n", Name: "b"}
	h.note(a, "u1", true)
	h.note(a, "u1", true)
	h.note(b, "u2", true)
	if got := h.lift(); len(got) != 2 || h.waiting() {
		t.Fatalf("lift: %v, waiting %v; want both once, none waiting", got, h.waiting())
	}
	if !h.lifted(a, "u1") || h.lifted(a, "other") || len(h.lift()) != 0 {
		t.Error("a lifted hold is recognised by UID and lifted once")
	}
	h.note(a, "u1", true) // held again after its write
	if !h.waiting() || h.lifted(a, "u1") {
		t.Error("a hold noted again waits for the next lift")
	}
	h.note(a, "u1", false)
	h.forget(b)
	if h.waiting() || h.lifted(b, "u2") || len(h.lift()) != 0 {
		t.Error("a written or forgotten hold is still remembered")
	}
	var none *saturationHolds
	none.note(a, "u1", true)
	if none.waiting() || none.lifted(a, "u1") || none.lift() != nil {
		t.Error("no memory remembers nothing")
	}
}
