package podsecurity_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskaction/executor/pkg/podsecurity"
)

// pod is a task pod in namespace team-a whose container "main" is changed by edit.
func pod(edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-1", Namespace: "team-a"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}}},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func mainSC(p *corev1.Pod) *corev1.SecurityContext {
	if p.Spec.Containers[0].SecurityContext == nil {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{}
	}
	return p.Spec.Containers[0].SecurityContext
}

// restrictedOK is what the restricted level asks of every container.
func restrictedOK(p *corev1.Pod) {
	sc := mainSC(p)
	sc.AllowPrivilegeEscalation = ptr.To(false)
	sc.RunAsNonRoot = ptr.To(true)
	sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

func TestCheckLevels(t *testing.T) {
	privileged := func(p *corev1.Pod) { mainSC(p).Privileged = ptr.To(true) }
	const (
		privMsg    = `privileged: container "main" must not set securityContext.privileged=true (forbidden by the %s pod security level)`
		nonRootMsg = `runAsNonRoot != true: pod or container "main" must set securityContext.runAsNonRoot=true (forbidden by the restricted pod security level)`
	)
	cases := []struct {
		name  string
		level string
		pod   *corev1.Pod
		want  []string // exact messages, in order
	}{
		{"plain pod, baseline", "baseline", pod(nil), nil},
		{"plain pod, privileged", "privileged", pod(nil), nil},
		{"privileged container, baseline", "baseline", pod(privileged), []string{strings.ReplaceAll(privMsg, "%s", "baseline")}},
		{"privileged container, privileged", "privileged", pod(privileged), nil},
		{"hostPID, baseline", "baseline", pod(func(p *corev1.Pod) { p.Spec.HostPID = true }),
			[]string{"host namespaces: hostPID=true (forbidden by the baseline pod security level)"}},
		{"hostNetwork, baseline", "baseline", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
			[]string{"host namespaces: hostNetwork=true (forbidden by the baseline pod security level)"}},
		{"hostNetwork, privileged", "privileged", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), nil},
		{"hostPath of /, baseline", "baseline", pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), []string{`hostPath volumes: volume "root" (forbidden by the baseline pod security level)`}},
		{"added SYS_ADMIN, baseline", "baseline", pod(func(p *corev1.Pod) {
			mainSC(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		}), []string{`non-default capabilities: container "main" must not include "SYS_ADMIN" in securityContext.capabilities.add (forbidden by the baseline pod security level)`}},
		{"added CHOWN (a default capability), baseline", "baseline", pod(func(p *corev1.Pod) {
			mainSC(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"CHOWN"}}
		}), nil},
		{"restricted pod, restricted", "restricted", pod(restrictedOK), nil},
		{"runAsNonRoot missing, restricted", "restricted", pod(func(p *corev1.Pod) { restrictedOK(p); mainSC(p).RunAsNonRoot = nil }),
			[]string{nonRootMsg}},
		{"runAsNonRoot missing, baseline", "baseline", pod(func(p *corev1.Pod) { restrictedOK(p); mainSC(p).RunAsNonRoot = nil }), nil},
		{"runAsNonRoot on the pod instead, restricted", "restricted", pod(func(p *corev1.Pod) {
			restrictedOK(p)
			mainSC(p).RunAsNonRoot = nil
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
		}), nil},
		{"privileged init container, baseline", "baseline", pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}), []string{`privileged: container "setup" must not set securityContext.privileged=true (forbidden by the baseline pod security level)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := podsecurity.New(tc.level, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := messages(p.Check(tc.pod))
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations:\n got %q\nwant %q", got, tc.want)
			}
			if err := podsecurity.Err(p.Check(tc.pod)); (err == nil) != (len(tc.want) == 0) {
				t.Errorf("Err = %v with %d violations", err, len(tc.want))
			}
		})
	}
}

func TestCheckServiceAccounts(t *testing.T) {
	allowed := map[string][]string{
		"team-a": {"runner", "builder"},
		"team-b": {"*"},
		"shared": {"default"},
	}
	withWildcardNS := map[string][]string{"team-a": {"runner"}, "*": {"default"}}
	sa := func(ns, name string) *corev1.Pod {
		return pod(func(p *corev1.Pod) { p.Namespace = ns; p.Spec.ServiceAccountName = name })
	}
	alias := func(ns, name, deprecated string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.Namespace, p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = ns, name, deprecated
		})
	}
	cases := []struct {
		name    string
		allowed map[string][]string
		pod     *corev1.Pod
		want    []string
	}{
		{"no list: any account", nil, sa("team-a", "cluster-admin-sa"), nil},
		{"listed account", allowed, sa("team-a", "builder"), nil},
		{"account not on the list", allowed, sa("team-a", "deployer"),
			[]string{`service account "deployer" is not allowed in namespace "team-a" (allowed: "runner", "builder")`}},
		{"no account named means default", allowed, sa("team-a", ""),
			[]string{`service account "default" is not allowed in namespace "team-a" (allowed: "runner", "builder")`}},
		{"default allowed", allowed, sa("shared", ""), nil},
		{"any account in team-b", allowed, sa("team-b", "whatever"), nil},
		{"namespace not listed", allowed, sa("team-c", "runner"),
			[]string{`service account "runner": no service account is allowed in namespace "team-c" (podSecurity.allowedServiceAccounts does not list it)`}},
		{"namespace wildcard covers the unlisted", withWildcardNS, sa("team-c", "default"), nil},
		{"namespace wildcard is not a fallback for listed namespaces", withWildcardNS, sa("team-a", "default"),
			[]string{`service account "default" is not allowed in namespace "team-a" (allowed: "runner")`}},
		{"namespace wildcard limits the unlisted", withWildcardNS, sa("team-c", "runner"),
			[]string{`service account "runner" is not allowed in namespace "team-c" (allowed: "default")`}},
		// The deprecated alias spec.serviceAccount: the API server runs the
		// pod as it when serviceAccountName is empty.
		{"alias alone names an account not on the list", allowed, alias("team-a", "", "namespace-admin"),
			[]string{`service account "namespace-admin" is not allowed in namespace "team-a" (allowed: "runner", "builder")`}},
		{"alias alone names a listed account", allowed, alias("team-a", "", "runner"), nil},
		{"alias beside an allowed name is checked too", allowed, alias("team-a", "runner", "namespace-admin"),
			[]string{`service account "namespace-admin" is not allowed in namespace "team-a" (allowed: "runner", "builder")`}},
		{"alias equal to the name: one check", allowed, alias("team-a", "deployer", "deployer"),
			[]string{`service account "deployer" is not allowed in namespace "team-a" (allowed: "runner", "builder")`}},
		{"alias of an allowed account beside an allowed name", allowed, alias("team-a", "runner", "builder"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := podsecurity.New("privileged", tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if got := messages(p.Check(tc.pod)); !slices.Equal(got, tc.want) {
				t.Errorf("violations:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("both rules report", func(t *testing.T) {
		p, err := podsecurity.New("baseline", allowed)
		if err != nil {
			t.Fatal(err)
		}
		bad := sa("team-a", "deployer")
		bad.Spec.HostPID = true
		err = podsecurity.Err(p.Check(bad))
		want := `the pod is refused by the executor's pod security policy: host namespaces: hostPID=true (forbidden by the baseline pod security level); ` +
			`service account "deployer" is not allowed in namespace "team-a" (allowed: "runner", "builder")`
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	})
	t.Run("the policy keeps its own copy", func(t *testing.T) {
		m := map[string][]string{"team-a": {"runner"}}
		p, err := podsecurity.New("baseline", m)
		if err != nil {
			t.Fatal(err)
		}
		m["team-a"][0] = "other"
		if v := p.Check(sa("team-a", "runner")); len(v) != 0 {
			t.Errorf("changing the caller's map changed the policy: %v", v)
		}
	})
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name    string
		level   string
		allowed map[string][]string
		want    string
	}{
		{"unknown level", "admin", nil,
			`pod security policy: level: "admin" is not a pod security level (use baseline, restricted or privileged)`},
		{"empty level", "", nil,
			`pod security policy: level: "" is not a pod security level (use baseline, restricted or privileged)`},
		{"level in capitals", "Baseline", nil,
			`pod security policy: level: "Baseline" is not a pod security level (use baseline, restricted or privileged)`},
		{"bad namespace", "baseline", map[string][]string{"Team_A": {"runner"}},
			`pod security policy: allowedServiceAccounts: "Team_A": not a namespace name (or "*"): a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"empty list", "baseline", map[string][]string{"team-a": {}},
			`pod security policy: allowedServiceAccounts: "team-a": lists no service account; list at least one, or "*" for any`},
		{"bad account", "baseline", map[string][]string{"team-a": {"Runner!"}},
			`pod security policy: allowedServiceAccounts: "team-a": "Runner!" is not a service account name (or "*"): a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"every problem at once", "root", map[string][]string{"team-a": nil},
			`pod security policy: level: "root" is not a pod security level (use baseline, restricted or privileged); allowedServiceAccounts: "team-a": lists no service account; list at least one, or "*" for any`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := podsecurity.New(tc.level, tc.allowed)
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
	for _, l := range []string{"baseline", "restricted", "privileged"} {
		p, err := podsecurity.New(l, map[string][]string{"*": {"*"}})
		if err != nil || string(p.Level()) != l {
			t.Errorf("New(%q) = %v, %v", l, p, err)
		}
	}
}

func messages(vs []podsecurity.Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Message)
	}
	return out
}
