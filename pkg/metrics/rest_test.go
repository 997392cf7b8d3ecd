package metrics

import (
	"net/url"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func TestRequestInfo(t *testing.T) {
	for _, tc := range []struct {
		method, url    string
		verb, resource string
		watch          bool
	}{
		{"GET", "/api/v1/namespaces/ns/pods/p1", "get", "pods", false},
		{"GET", "/api/v1/namespaces/ns/pods", "list", "pods", false},
		{"GET", "/api/v1/pods?labelSelector=a%3Db&limit=500", "list", "pods", false},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=1", "watch", "pods", true},
		{"GET", "/api/v1/namespaces/ns/pods?watch=1", "watch", "pods", true},
		{"GET", "/api/v1/namespaces/ns/pods?watch=false", "list", "pods", false},
		{"GET", "/api/v1/watch/namespaces/ns/pods", "watch", "pods", true},
		{"POST", "/api/v1/namespaces/ns/pods", "create", "pods", false},
		{"DELETE", "/api/v1/namespaces/ns/pods/p1", "delete", "pods", false},
		{"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection", "pods", false},
		{"POST", "/api/v1/namespaces/ns/pods/p1/eviction", "create", "pods/eviction", false},
		{"GET", "/api/v1/namespaces/ns/pods/p1/log", "get", "pods/log", false},
		{"GET", "/apis/flyte.org/v1/namespaces/ns/taskactions/t1", "get", "taskactions.flyte.org", false},
		{"PATCH", "/apis/flyte.org/v1/namespaces/ns/taskactions/t1", "patch", "taskactions.flyte.org", false},
		{"PUT", "/apis/flyte.org/v1/namespaces/ns/taskactions/t1/status", "update", "taskactions.flyte.org/status", false},
		{"GET", "/apis/flyte.org/v1/taskactions?limit=500&continue=abc", "list", "taskactions.flyte.org", false},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/abf369a8.flyte.org", "update", "leases.coordination.k8s.io", false},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "create", "events.events.k8s.io", false},
		// Namespaces themselves, whose subresources look like resources inside one.
		{"GET", "/api/v1/namespaces", "list", "namespaces", false},
		{"GET", "/api/v1/namespaces/ns", "get", "namespaces", false},
		{"PUT", "/api/v1/namespaces/ns/finalize", "update", "namespaces/finalize", false},
		{"GET", "/api/v1/namespaces/ns/status", "get", "namespaces/status", false},
		// Outside any resource.
		{"GET", "/api", "get", ResourceNone, false},
		{"GET", "/api/v1", "get", ResourceNone, false},
		{"GET", "/apis/flyte.org/v1", "get", ResourceNone, false},
		{"GET", "/version", "get", ResourceNone, false},
		{"GET", "/openapi/v3", "get", ResourceNone, false},
		{"GET", "/", "get", ResourceNone, false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		verb, resource, watch := requestInfo(tc.method, u)
		if verb != tc.verb || resource != tc.resource || watch != tc.watch {
			t.Errorf("%s %s = %s %s watch=%v, want %s %s watch=%v", tc.method, tc.url, verb, resource, watch, tc.verb, tc.resource, tc.watch)
		}
	}
}

func TestPhase(t *testing.T) {
	c := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  string
	}{
		{"no status", nil, PhaseUnknown},
		{"queued", []metav1.Condition{c(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonQueued)}, flytev1.ReasonQueued},
		{"executing", []metav1.Condition{
			c(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonExecuting),
			c(flytev1.ConditionSucceeded, metav1.ConditionFalse, "NotYet"),
		}, flytev1.ReasonExecuting},
		{"succeeded", []metav1.Condition{
			c(flytev1.ConditionProgressing, metav1.ConditionFalse, "Whatever"),
			c(flytev1.ConditionSucceeded, metav1.ConditionTrue, flytev1.ReasonCompleted),
		}, flytev1.ReasonCompleted},
		{"timed out", []metav1.Condition{
			c(flytev1.ConditionProgressing, metav1.ConditionFalse, flytev1.ReasonExecuting),
			c(flytev1.ConditionFailed, metav1.ConditionTrue, flytev1.ReasonTimedOut),
		}, flytev1.ReasonTimedOut},
		{"Failed=False is not terminal", []metav1.Condition{
			c(flytev1.ConditionFailed, metav1.ConditionFalse, flytev1.ReasonPermanentFailure),
			c(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonRetryableFailure),
		}, flytev1.ReasonRetryableFailure},
	} {
		ta := &flytev1.TaskAction{Status: flytev1.TaskActionStatus{Conditions: tc.conds}}
		if got := Phase(ta); got != tc.want {
			t.Errorf("%s: Phase = %q, want %q", tc.name, got, tc.want)
		}
	}
}
