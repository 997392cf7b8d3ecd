package config

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/taskaction/executor/pkg/podsecurity"
)

// ServiceAccounts maps a namespace to the service accounts task pods may use
// there. As a flag it is written `ns=sa,ns=sa2,other=*`; a namespace named
// twice collects its accounts.
type ServiceAccounts map[string][]string

// String renders the flag form (namespaces sorted, each one's accounts in
// order), which Set reads back to the same map.
func (s ServiceAccounts) String() string {
	namespaces := make([]string, 0, len(s))
	for ns := range s {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	var pairs []string
	for _, ns := range namespaces {
		for _, sa := range s[ns] {
			pairs = append(pairs, ns+"="+sa)
		}
	}
	return strings.Join(pairs, ",")
}

// Set replaces the map with the pairs of v.
func (s *ServiceAccounts) Set(v string) error {
	m := ServiceAccounts{}
	for _, pair := range strings.Split(v, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		ns, sa, ok := strings.Cut(pair, "=")
		if !ok || ns == "" || sa == "" {
			return fmt.Errorf("%q is not namespace=serviceaccount", pair)
		}
		m[ns] = append(m[ns], sa)
	}
	*s = m
	return nil
}

// MarshalJSON prints no list as an empty mapping rather than null.
func (s ServiceAccounts) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string][]string(s))
}

// Type names the flag's value in --help.
func (s *ServiceAccounts) Type() string { return "namespace=serviceaccount,..." }

// Policy builds the pod-security policy the reconciler and the admission
// webhook enforce.
func (p PodSecurityConfig) Policy() (*podsecurity.Policy, error) {
	return podsecurity.New(p.Level, p.AllowedServiceAccounts)
}

// validate returns one problem per bad entry.
func (p PodSecurityConfig) validate() []Problem {
	var out []Problem
	if _, err := podsecurity.ParseLevel(p.Level); err != nil {
		out = append(out, Problem{Key: "podSecurity.level", Message: err.Error()})
	}
	for _, m := range podsecurity.ValidateAllowedServiceAccounts(p.AllowedServiceAccounts) {
		out = append(out, Problem{Key: "podSecurity.allowedServiceAccounts", Message: m})
	}
	return out
}
