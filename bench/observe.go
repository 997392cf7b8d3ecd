package main

import (
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// record is what the harness saw of one TaskAction.
type record struct {
	created, podCreated, podTerminal, taTerminal, gone time.Time
	// running are the receipt times of each of its pods' first update in
	// phase Running, in order (kwok writes the phase and the containers'
	// running.startedAt in one update; startedAt itself has 1 s precision).
	running []time.Time
	// executing is when the harness first saw Progressing=True with reason
	// Executing (zero: never).
	executing time.Time
	// statusUpdates and metaUpdates count the TaskAction's updates seen on
	// the watch: status writes, and metadata writes (the finalizer's).
	statusUpdates, metaUpdates int
	failed                     bool
	want                       outcome
	pods                       int // distinct pods seen: attempts run
}

// podSeen is what the harness has seen of one pod.
type podSeen struct{ running, terminal bool }

// observer is what the harness's watches saw, by TaskAction and by pod.
type observer struct {
	mu      sync.Mutex
	recs    map[string]*record
	pods    map[string]podSeen
	done    []time.Time
	left    int
	allDone chan struct{}
	// goneLeft counts down the deletions once armed (armGone).
	goneLeft int
	allGone  chan struct{}
	// now is time.Now; tests set a clock of their own.
	now func() time.Time
}

func newObserver(n int) *observer {
	return &observer{recs: map[string]*record{}, pods: map[string]podSeen{}, left: n, allDone: make(chan struct{}), now: time.Now}
}

func (ob *observer) get(name string) *record {
	r, ok := ob.recs[name]
	if !ok {
		r = &record{}
		ob.recs[name] = r
	}
	return r
}

func (ob *observer) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := ob.now()
	owner := ""
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "TaskAction" {
			owner = ref.Name
		}
	}
	if owner == "" {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(owner)
	st, seen := ob.pods[p.Name]
	if !seen {
		r.pods++
	}
	if r.podCreated.IsZero() {
		r.podCreated = now
	}
	if p.Status.Phase == corev1.PodRunning && !st.running {
		st.running = true
		r.running = append(r.running, now)
	}
	// The last attempt's pod end is the one that ends the TaskAction.
	if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && !st.terminal {
		st.terminal = true
		r.podTerminal = now
	}
	ob.pods[p.Name] = st
}

// onTA takes a TaskAction's add (old nil) or update: its first Executing,
// its end, and the write the update was.
func (ob *observer) onTA(old, obj any) {
	ta, ok := obj.(*flytev1.TaskAction)
	if !ok {
		return
	}
	prev, _ := old.(*flytev1.TaskAction)
	if prev != nil && prev.ResourceVersion == ta.ResourceVersion {
		return // an informer resync: no write
	}
	now := ob.now()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(ta.Name)
	if prev != nil {
		// The status subresource cannot change metadata, nor a metadata
		// patch the status: an update is one or the other.
		if metadataChanged(prev, ta) {
			r.metaUpdates++
		} else {
			r.statusUpdates++
		}
	}
	if r.executing.IsZero() && isExecuting(ta) {
		r.executing = now
	}
	if !r.taTerminal.IsZero() || !isTerminal(ta) {
		return
	}
	r.taTerminal = now
	for _, c := range ta.Status.Conditions {
		if c.Type == flytev1.ConditionFailed && c.Status == metav1.ConditionTrue {
			r.failed = true
		}
	}
	ob.done = append(ob.done, now)
	ob.left--
	if ob.left == 0 {
		close(ob.allDone)
	}
}

// isExecuting: the status Flyte's UI shows as running.
func isExecuting(ta *flytev1.TaskAction) bool {
	c := meta.FindStatusCondition(ta.Status.Conditions, flytev1.ConditionProgressing)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == flytev1.ReasonExecuting
}

// metadataChanged: a write of the TaskAction's metadata (finalizers,
// labels, annotations, deletion) between two versions.
func metadataChanged(a, b *flytev1.TaskAction) bool {
	return !slices.Equal(a.Finalizers, b.Finalizers) || !maps.Equal(a.Labels, b.Labels) ||
		!maps.Equal(a.Annotations, b.Annotations) || !a.DeletionTimestamp.Equal(b.DeletionTimestamp)
}

// armGone starts counting the deletions of the n TaskActions created.
func (ob *observer) armGone() {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.allGone = make(chan struct{})
	for _, r := range ob.recs {
		if !r.created.IsZero() && r.gone.IsZero() {
			ob.goneLeft++
		}
	}
	if ob.goneLeft == 0 {
		close(ob.allGone)
	}
}

func (ob *observer) onTADelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ta, ok := obj.(*flytev1.TaskAction)
	if !ok {
		return
	}
	now := ob.now()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(ta.Name)
	if !r.gone.IsZero() {
		return
	}
	r.gone = now
	if ob.allGone != nil && !r.created.IsZero() {
		ob.goneLeft--
		if ob.goneLeft == 0 {
			close(ob.allGone)
		}
	}
}
