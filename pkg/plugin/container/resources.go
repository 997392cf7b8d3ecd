package container

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/quantity"
)

// MergeResourceList is a copy of base with over's entries replacing base's
// of the same name; nil when both are empty.
func MergeResourceList(base, over corev1.ResourceList) corev1.ResourceList {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range base {
		out[k] = v.DeepCopy()
	}
	for k, v := range over {
		out[k] = v.DeepCopy()
	}
	return out
}

// defaultResources completes the primary container's resources by Flyte's
// rules (CompleteResources), ephemeral storage and accelerators only when
// asked for.
func defaultResources(r corev1.ResourceRequirements, s plugin.Settings) (corev1.ResourceRequirements, error) {
	out := *r.DeepCopy()
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	optional := append([]corev1.ResourceName{corev1.ResourceEphemeralStorage}, acceleratorResourceNames(s)...)
	if err := CompleteResources(out, s, optional...); err != nil {
		return out, err
	}
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out, nil
}

// CompleteResources completes r (its Requests and Limits not nil) by Flyte's
// rules: CPU and memory always (a missing request copies the limit, else the
// executor default; a missing limit copies the request), each of optional
// only when asked for; a request above its limit is lowered to the limit.
func CompleteResources(r corev1.ResourceRequirements, s plugin.Settings, optional ...corev1.ResourceName) error {
	for _, d := range []struct {
		name corev1.ResourceName
		def  string
	}{{corev1.ResourceCPU, s.DefaultCPU}, {corev1.ResourceMemory, s.DefaultMemory}} {
		var def resource.Quantity
		if d.def != "" {
			q, err := quantity.Parse(d.def)
			if err != nil {
				return fmt.Errorf("executor default %s %q: %w", d.name, d.def, err)
			}
			def = q
		}
		adjust(r, d.name, def)
	}
	for _, name := range optional {
		_, req := r.Requests[name]
		_, lim := r.Limits[name]
		if req || lim {
			adjust(r, name, resource.Quantity{})
		}
	}
	return nil
}

// adjust sets request and limit of name: an unset (or zero) request takes the
// limit, else def; an unset limit takes the request; the request is at most
// the limit. Nothing at all stays unset.
func adjust(r corev1.ResourceRequirements, name corev1.ResourceName, def resource.Quantity) {
	req, lim := r.Requests[name], r.Limits[name]
	if req.IsZero() {
		if !lim.IsZero() {
			req = lim.DeepCopy()
		} else {
			req = def.DeepCopy()
		}
	}
	if lim.IsZero() {
		lim = req.DeepCopy()
	}
	if !lim.IsZero() && req.Cmp(lim) > 0 {
		req = lim.DeepCopy()
	}
	if req.IsZero() && lim.IsZero() {
		delete(r.Requests, name)
		delete(r.Limits, name)
		return
	}
	r.Requests[name] = req
	r.Limits[name] = lim
}
