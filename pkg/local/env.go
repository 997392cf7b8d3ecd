package local

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// refLookup reads one key of a ConfigMap ("configmap") or Secret ("secret")
// in ns. A nil refLookup makes every such reference an error.
type refLookup func(kind, ns, name, key string) (string, bool, error)

// mapLookup reads a whole ConfigMap or Secret (for envFrom).
type mapLookup func(kind, ns, name string) (map[string]string, bool, error)

// containerEnv is the environment of c's process, as a kubelet would give it:
// envFrom first, then env in order, each value able to refer to earlier ones
// with $(NAME). base holds what the process needs from the host (PATH, HOME);
// the pod's own variables override it.
func containerEnv(pod *corev1.Pod, c *corev1.Container, base map[string]string, one refLookup, all mapLookup) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, k := range sortedKeys(base) {
		set(k, base[k])
	}
	for _, ef := range c.EnvFrom {
		kind, name, optional := "", "", false
		switch {
		case ef.ConfigMapRef != nil:
			kind, name, optional = "configmap", ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional
		case ef.SecretRef != nil:
			kind, name, optional = "secret", ef.SecretRef.Name, ef.SecretRef.Optional != nil && *ef.SecretRef.Optional
		default:
			continue
		}
		if all == nil {
			return nil, fmt.Errorf("envFrom %s %q: not supported here", kind, name)
		}
		m, found, err := all(kind, pod.Namespace, name)
		if err != nil {
			return nil, fmt.Errorf("envFrom %s %q: %w", kind, name, err)
		}
		if !found {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s %q not found", kind, name)
		}
		for _, k := range sortedKeys(m) {
			set(ef.Prefix+k, m[k])
		}
	}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, skip, err := valueFrom(pod, c, e, one)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

// valueFrom resolves one env var's valueFrom. skip is set for a missing
// optional reference, which a kubelet leaves unset.
func valueFrom(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, one refLookup) (v string, skip bool, err error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := fieldRef(pod, vf.FieldRef.FieldPath)
		return v, false, err
	case vf.ConfigMapKeyRef != nil || vf.SecretKeyRef != nil:
		kind, name, key, optional := "configmap", "", "", false
		if r := vf.ConfigMapKeyRef; r != nil {
			name, key, optional = r.Name, r.Key, r.Optional != nil && *r.Optional
		} else {
			r := vf.SecretKeyRef
			kind, name, key, optional = "secret", r.Name, r.Key, r.Optional != nil && *r.Optional
		}
		if one == nil {
			return "", false, fmt.Errorf("%s references are not supported here", kind)
		}
		v, found, err := one(kind, pod.Namespace, name, key)
		if err != nil {
			return "", false, err
		}
		if !found {
			if optional {
				return "", true, nil
			}
			return "", false, fmt.Errorf("key %q of %s %q not found", key, kind, name)
		}
		return v, false, nil
	case vf.ResourceFieldRef != nil:
		r := vf.ResourceFieldRef
		src := c
		if r.ContainerName != "" {
			src = nil
			for i := range pod.Spec.Containers {
				if pod.Spec.Containers[i].Name == r.ContainerName {
					src = &pod.Spec.Containers[i]
				}
			}
			if src == nil {
				return "", false, fmt.Errorf("resourceFieldRef: no container %q", r.ContainerName)
			}
		}
		kind, res, ok := strings.Cut(r.Resource, ".")
		if !ok || (kind != "limits" && kind != "requests") {
			return "", false, fmt.Errorf("resourceFieldRef %q is not supported", r.Resource)
		}
		list := src.Resources.Limits
		if kind == "requests" {
			list = src.Resources.Requests
		}
		q, ok := list[corev1.ResourceName(res)]
		if !ok {
			return "0", false, nil
		}
		if !r.Divisor.IsZero() {
			return fmt.Sprint((q.MilliValue() + r.Divisor.MilliValue() - 1) / r.Divisor.MilliValue()), false, nil
		}
		if res == "cpu" {
			return fmt.Sprint((q.MilliValue() + 999) / 1000), false, nil // a kubelet rounds cores up
		}
		return fmt.Sprint(q.Value()), false, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// fieldRef is the downward API for env vars. The pod runs on this host, so
// its IPs are the loopback address.
func fieldRef(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP", "status.podIPs", "status.hostIPs":
		return loopbackIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return m[key], nil
			}
		}
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// expand replaces $(NAME) with its value as a kubelet does: "$$" is a literal
// "$", and an undefined $(NAME) stays as written.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// argv is what the process runs: command then args, with $(NAME) expanded
// from env. Without an image there is no entrypoint, so a container without
// command runs its args, and one with neither cannot run.
func argv(c *corev1.Container, env []string) ([]string, error) {
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	var out []string
	for _, s := range append(append([]string{}, c.Command...), c.Args...) {
		out = append(out, expand(s, lookup))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("container %q has no command or args: executor local runs them as a local process and does not use the image %q", c.Name, c.Image)
	}
	return out, nil
}
