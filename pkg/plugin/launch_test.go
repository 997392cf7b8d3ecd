package plugin

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func TestHolderOf(t *testing.T) {
	ta := &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}
	ref := func(name string, uid types.UID, controller bool, kind string) metav1.OwnerReference {
		r := ControllerRef(&flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}})
		r.Controller, r.Kind = &controller, kind
		return r
	}
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		ta   *flytev1.TaskAction
		want Holder
	}{
		{"no owner", nil, ta, HeldByOther},
		{"this TaskAction", []metav1.OwnerReference{ref("a", "uid-a", true, "TaskAction")}, ta, HeldByThis},
		{"an earlier TaskAction of the name", []metav1.OwnerReference{ref("a", "uid-old", true, "TaskAction")}, ta, HeldByPrevious},
		{"another TaskAction", []metav1.OwnerReference{ref("b", "uid-b", true, "TaskAction")}, ta, HeldByOther},
		{"an owner that is not the controller", []metav1.OwnerReference{ref("a", "uid-a", false, "TaskAction")}, ta, HeldByOther},
		{"another kind of the name", []metav1.OwnerReference{ref("a", "uid-a", true, "Job")}, ta, HeldByOther},
		{"no UID to compare: the name", []metav1.OwnerReference{ref("a", "uid-old", true, "TaskAction")}, &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, HeldByThis},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-0", OwnerReferences: tc.refs}}
		if got := HolderOf(pod, tc.ta); got != tc.want {
			t.Errorf("%s: HolderOf = %d, want %d", tc.name, got, tc.want)
		}
		if OwnedBy(pod, tc.ta) != (tc.want == HeldByThis) {
			t.Errorf("%s: OwnedBy disagrees with HolderOf", tc.name)
		}
	}
}
