package container

import (
	"strings"

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
	spec.NodeSelector = union(s.DefaultNodeSelector, spec.NodeSelector)
	if interruptible {
		spec.NodeSelector = union(spec.NodeSelector, s.InterruptibleNodeSelector)
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	req := s.NonInterruptibleNodeSelectorRequirement
	if interruptible {
		req = s.InterruptibleNodeSelectorRequirement
	}
	if req != nil {
		addRequiredNodeSelectorRequirement(spec.Affinity, *req.DeepCopy())
	}
}

func deepCopyTolerations(in []corev1.Toleration) []corev1.Toleration {
	out := make([]corev1.Toleration, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// addRequiredNodeSelectorRequirement adds req to every required node selector
// term that lacks it, or makes it the only term.
func addRequiredNodeSelectorRequirement(a *corev1.Affinity, req corev1.NodeSelectorRequirement) {
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := a.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}
		return
	}
	for i := range terms {
		if !hasRequirement(terms[i].MatchExpressions, req) {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
		}
	}
}

func hasRequirement(reqs []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
	for _, x := range reqs {
		if x.Key == r.Key && x.Operator == r.Operator && strings.Join(x.Values, "\x00") == strings.Join(r.Values, "\x00") {
			return true
		}
	}
	return false
}
