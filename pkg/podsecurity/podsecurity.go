// Package podsecurity decides whether the executor may create a task pod:
// whoever may create a TaskAction otherwise makes the executor, with its own
// service account, create whatever pod the template asks for (a confused
// deputy). A Policy holds a Pod Security Standards level, evaluated by
// Kubernetes' reference implementation (k8s.io/pod-security-admission), and
// the service accounts task pods may use in each namespace.
//
// The package is pure: it reads the pod it is given and nothing else.
package podsecurity

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
)

// Level is a Pod Security Standards level.
type Level string

// The levels, from the most to the least permissive.
const (
	Privileged Level = "privileged"
	Baseline   Level = "baseline"
	Restricted Level = "restricted"
)

// DefaultLevel is the level used when none is configured.
const DefaultLevel = Baseline

// Wildcard in AllowedServiceAccounts: as a namespace, every namespace not
// listed; as a service account, any service account.
const Wildcard = "*"

// defaultServiceAccount is what Kubernetes runs a pod as when it names none.
const defaultServiceAccount = "default"

// ParseLevel reads a level name; the error lists the valid ones.
func ParseLevel(s string) (Level, error) {
	switch l := Level(s); l {
	case Privileged, Baseline, Restricted:
		return l, nil
	}
	return "", fmt.Errorf("%q is not a pod security level (use baseline, restricted or privileged)", s)
}

// ValidateAllowedServiceAccounts checks a namespace → service accounts map and
// returns one message per bad entry, each starting with the entry it is about.
func ValidateAllowedServiceAccounts(m map[string][]string) []string {
	var msgs []string
	for _, ns := range sortedKeys(m) {
		if ns != Wildcard {
			for _, e := range validation.IsDNS1123Label(ns) {
				msgs = append(msgs, fmt.Sprintf("%q: not a namespace name (or %q): %s", ns, Wildcard, e))
			}
		}
		if len(m[ns]) == 0 {
			msgs = append(msgs, fmt.Sprintf("%q: lists no service account; list at least one, or %q for any", ns, Wildcard))
		}
		for _, sa := range m[ns] {
			if sa == Wildcard {
				continue
			}
			for _, e := range validation.IsDNS1123Subdomain(sa) {
				msgs = append(msgs, fmt.Sprintf("%q: %q is not a service account name (or %q): %s", ns, sa, Wildcard, e))
			}
		}
	}
	return msgs
}

// Policy is a validated pod-security configuration. The zero value is not
// usable: build one with New.
type Policy struct {
	level    Level
	accounts map[string][]string // nil: any service account anywhere
}

// New builds a Policy from a level name and the allowed service accounts per
// namespace (empty: any). The error lists every problem.
func New(level string, allowedServiceAccounts map[string][]string) (*Policy, error) {
	l, err := ParseLevel(level)
	var msgs []string
	if err != nil {
		msgs = append(msgs, "level: "+err.Error())
	}
	for _, m := range ValidateAllowedServiceAccounts(allowedServiceAccounts) {
		msgs = append(msgs, "allowedServiceAccounts: "+m)
	}
	if len(msgs) > 0 {
		return nil, fmt.Errorf("pod security policy: %s", strings.Join(msgs, "; "))
	}
	p := &Policy{level: l}
	if len(allowedServiceAccounts) > 0 {
		p.accounts = make(map[string][]string, len(allowedServiceAccounts))
		for ns, sas := range allowedServiceAccounts {
			p.accounts[ns] = slices.Clone(sas)
		}
	}
	return p, nil
}

// Level is the policy's Pod Security Standards level.
func (p *Policy) Level() Level { return p.level }

// Violation is one reason a pod is refused, worded for the TaskAction's author.
type Violation struct {
	// Check names the rule: the Pod Security Standards check's reason (such
	// as "privileged" or "host namespaces"), or "service account".
	Check string
	// Message says what to change.
	Message string
}

func (v Violation) String() string { return v.Message }

// Check evaluates pod (its spec, its metadata, and its namespace for the
// service account rule) and returns every violation, or none if the executor
// may create it. pod.Namespace must be set when service accounts are limited.
// The service account rule applies to serviceAccountName and to its
// deprecated alias serviceAccount alike (see serviceAccounts).
func (p *Policy) Check(pod *corev1.Pod) []Violation {
	var out []Violation
	if p.level != Privileged {
		results := evaluator.EvaluatePod(
			psaapi.LevelVersion{Level: psaapi.Level(p.level), Version: psaapi.LatestVersion()},
			&pod.ObjectMeta, &pod.Spec)
		for _, r := range results {
			if r.Allowed {
				continue
			}
			msg := r.ForbiddenReason
			if r.ForbiddenDetail != "" {
				msg += ": " + r.ForbiddenDetail
			}
			out = append(out, Violation{
				Check:   r.ForbiddenReason,
				Message: fmt.Sprintf("%s (forbidden by the %s pod security level)", msg, p.level),
			})
		}
	}
	for _, sa := range serviceAccounts(&pod.Spec) {
		if v, ok := p.checkServiceAccount(pod.Namespace, sa); !ok {
			out = append(out, v)
		}
	}
	return out
}

// serviceAccounts are the service accounts spec names, the one it runs as
// first. It runs as serviceAccountName or, when that is empty, as the
// deprecated alias serviceAccount (the API server copies the alias into the
// empty field), else as the namespace's default (""). An alias that differs
// from a set serviceAccountName does not run, but is checked all the same:
// a pod that names an account the policy does not allow is refused rather
// than trusted to the API server's precedence.
func serviceAccounts(spec *corev1.PodSpec) []string {
	name, alias := spec.ServiceAccountName, spec.DeprecatedServiceAccount
	switch {
	case name == "":
		return []string{alias}
	case alias != "" && alias != name:
		return []string{name, alias}
	}
	return []string{name}
}

// Err is nil without violations, else one error naming them all.
func Err(vs []Violation) error {
	if len(vs) == 0 {
		return nil
	}
	msgs := make([]string, len(vs))
	for i, v := range vs {
		msgs[i] = v.Message
	}
	return fmt.Errorf("the pod is refused by the executor's pod security policy: %s", strings.Join(msgs, "; "))
}

func (p *Policy) checkServiceAccount(namespace, sa string) (Violation, bool) {
	if p.accounts == nil {
		return Violation{}, true
	}
	if sa == "" {
		sa = defaultServiceAccount
	}
	allowed, listed := p.accounts[namespace]
	if !listed {
		allowed, listed = p.accounts[Wildcard]
	}
	if !listed {
		return Violation{Check: "service account", Message: fmt.Sprintf(
			"service account %q: no service account is allowed in namespace %q (podSecurity.allowedServiceAccounts does not list it)",
			sa, namespace)}, false
	}
	if slices.Contains(allowed, Wildcard) || slices.Contains(allowed, sa) {
		return Violation{}, true
	}
	return Violation{Check: "service account", Message: fmt.Sprintf(
		"service account %q is not allowed in namespace %q (allowed: %s)", sa, namespace, quoteAll(allowed))}, false
}

// evaluator holds Kubernetes' own checks of each level, at their latest version.
var evaluator = func() psapolicy.Evaluator {
	e, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("pod security checks: %v", err)) // the library's own list; cannot fail
	}
	return e
}()

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
