//go:build tools

// Package tools pins the generators used by `make generate manifests`.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
