package container

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

func TestScheduling(t *testing.T) {
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	def := corev1.Toleration{Key: "dedicated", Value: "flyte", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}
	own := corev1.Toleration{Key: "own", Operator: corev1.TolerationOpExists}
	spotReq := corev1.NodeSelectorRequirement{Key: "lifecycle", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}
	onDemand := corev1.NodeSelectorRequirement{Key: "lifecycle", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot"}}
	s := plugin.Settings{
		DefaultTolerations: []corev1.Toleration{def}, DefaultNodeSelector: map[string]string{"pool": "default", "arch": "amd64"},
		InterruptibleTolerations: []corev1.Toleration{spot}, InterruptibleNodeSelector: map[string]string{"pool": "spot"},
		InterruptibleNodeSelectorRequirement: &spotReq, NonInterruptibleNodeSelectorRequirement: &onDemand,
	}
	for _, tc := range []struct {
		name          string
		interruptible *bool
		wantTols      []corev1.Toleration
		wantNS        map[string]string
		wantReq       corev1.NodeSelectorRequirement
	}{
		{"interruptible", ptr(true), []corev1.Toleration{spot, def, own}, map[string]string{"pool": "spot", "arch": "arm64"}, spotReq},
		{"not interruptible", ptr(false), []corev1.Toleration{def, own}, map[string]string{"pool": "default", "arch": "arm64"}, onDemand},
		{"unset", nil, []corev1.Toleration{def, own}, map[string]string{"pool": "default", "arch": "arm64"}, onDemand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			ta.Spec.Interruptible = tc.interruptible
			setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{Tolerations: []corev1.Toleration{own}, NodeSelector: map[string]string{"arch": "arm64"}})
			pod := build(t, ta, 1, s)
			if !reflect.DeepEqual(pod.Spec.Tolerations, tc.wantTols) {
				t.Errorf("tolerations = %+v", pod.Spec.Tolerations)
			}
			if !reflect.DeepEqual(pod.Spec.NodeSelector, tc.wantNS) {
				t.Errorf("node selector = %v", pod.Spec.NodeSelector)
			}
			terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || !reflect.DeepEqual(terms[0].MatchExpressions, []corev1.NodeSelectorRequirement{tc.wantReq}) {
				t.Errorf("node affinity = %+v", terms)
			}
		})
	}
}
