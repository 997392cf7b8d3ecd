package testenv

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// Eventually polls cond until it holds, or fails the test after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var nsSeq atomic.Int64

// Namespace creates a fresh namespace for one test.
func Namespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d-%d", prefix, time.Now().UnixNano()%100000, nsSeq.Add(1))
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// GetTaskAction reads a TaskAction from the API server.
func GetTaskAction(t testing.TB, c client.Client, ns, name string) *flytev1.TaskAction {
	t.Helper()
	ta := &flytev1.TaskAction{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ta); err != nil {
		t.Fatalf("get TaskAction %s/%s: %v", ns, name, err)
	}
	return ta
}

// WaitReason waits until the TaskAction's condition typ has the reason.
func WaitReason(t testing.TB, c client.Client, ns, name, typ, reason string) *flytev1.TaskAction {
	t.Helper()
	var ta *flytev1.TaskAction
	Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s %s reason %s", ns, name, typ, reason), func() bool {
		ta = GetTaskAction(t, c, ns, name)
		cond := meta.FindStatusCondition(ta.Status.Conditions, typ)
		return cond != nil && cond.Reason == reason
	})
	return ta
}

// WaitPod waits until the pod exists and returns it.
func WaitPod(t testing.TB, c client.Client, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	Eventually(t, 30*time.Second, "pod "+ns+"/"+name, func() bool {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod) == nil
	})
	return pod
}

// PatchPodStatus plays the kubelet (envtest has none): it writes the pod's
// status as mutate leaves it, retrying on conflicts.
func PatchPodStatus(t testing.TB, c client.Client, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := &corev1.Pod{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			t.Fatalf("get pod: %v", err)
		}
		base := cur.DeepCopy()
		mutate(&cur.Status)
		err := c.Status().Patch(context.Background(), cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 5 {
			t.Fatalf("patch pod status: %v", err)
		}
	}
}

// CounterTotal sums the counter name in controller-runtime's metrics registry
// (this process), over the series that carry every label in match.
func CounterTotal(t testing.TB, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if have[k] != v {
					continue series
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
