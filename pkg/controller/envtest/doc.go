// Package envtest holds the reconciler's suites against a real kube-apiserver
// and etcd (envtest). They live apart from pkg/controller so that the pure
// decision and apply tests there run without a control plane.
package envtest
