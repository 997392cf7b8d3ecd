//go:build tools

// Package k8s pins the control-plane binaries the project builds for envtest,
// the local run and the benchmark.
package k8s

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
