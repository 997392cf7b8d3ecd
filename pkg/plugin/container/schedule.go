package container

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/pkg/plugin"
)

// schedule applies the configured placement: default and interruptible
// tolerations go before the pod spec's own, node selectors are merged (the
// pod spec's win over the default, the interruptible one over both), and the
// (non-)interruptible node selector requirement joins the required node
// affinity.
func schedule(spec *corev1.PodSpec, interruptible bool, s plugin.Settings) {
	var tols []corev1.Toleration
	if interruptible {
		tols = append(tols, s.InterruptibleTolerations...)
	}
	tols = append(tols, s.DefaultTolerations...)
	if len(tols) > 0 {
		spec.Tolerations = append(deepCopyTolerations(tols), spec.Tolerations...)
	}
	spec.NodeSelector = Union(s.DefaultNodeSelector, spec.NodeSelector)
	if interruptible {
		spec.NodeSelector = Union(spec.NodeSelector, s.InterruptibleNodeSelector)
	}
	AddNodeSelectorRequirement(spec, interruptible, s)
}

// AddNodeSelectorRequirement adds the configured (non-)interruptible node
// selector requirement to the pod's required node affinity
// (RequireInEveryTerm). Idempotent.
func AddNodeSelectorRequirement(spec *corev1.PodSpec, interruptible bool, s plugin.Settings) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	req := s.NonInterruptibleNodeSelectorRequirement
	if interruptible {
		req = s.InterruptibleNodeSelectorRequirement
	}
	if req != nil {
		RequireInEveryTerm(spec.Affinity, *req)
	}
}

func deepCopyTolerations(in []corev1.Toleration) []corev1.Toleration {
	out := make([]corev1.Toleration, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// RequireInEveryTerm adds req to every required node selector term that
// lacks it, or makes it the only term.
func RequireInEveryTerm(a *corev1.Affinity, req corev1.NodeSelectorRequirement) {
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(sel.NodeSelectorTerms) == 0 {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{*req.DeepCopy()}}}
		return
	}
	for i := range sel.NodeSelectorTerms {
		has := false
		for _, r := range sel.NodeSelectorTerms[i].MatchExpressions {
			has = has || (r.Key == req.Key && r.Operator == req.Operator && slices.Equal(r.Values, req.Values))
		}
		if !has {
			sel.NodeSelectorTerms[i].MatchExpressions = append(sel.NodeSelectorTerms[i].MatchExpressions, *req.DeepCopy())
		}
	}
}
