// Package chart tests charts/executor: rendered with Helm's SDK for several
// value sets, linted, and applied to a real API server (envtest) with
// server-side dry run; its RBAC against config/rbac, its CRD against
// config/crd/bases, its values against the executor's configuration keys, and
// the Flyte guide's example configuration against the executor's loader.
package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// env is the control plane: the project's kube-apiserver and etcd from
// bin/k8s (make envtest), as internal/testenv starts them. It is started here
// directly so that this module builds only pkg/config of the executor.
var env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Namespaces the value sets install into or name.
var namespaces = []string{releaseNS, "team-a", "team-b", "flyte"}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "..", "bin", "k8s")
	}
	timeout := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT")); err == nil {
		timeout = d
	}
	env.Environment = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// The TaskAction CRD, and stand-ins for cert-manager's and the Prometheus Operator's.
		CRDDirectoryPaths:        []string{filepath.Join("..", "..", "config", "crd", "bases"), filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	var err error
	if env.Config, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start envtest (run `make envtest`):", err)
		return 1
	}
	defer env.Stop()
	if env.Client, err = client.New(env.Config, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, ns := range namespaces {
		o := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			// The executor's own namespace runs the restricted profile; warn makes
			// the API server say so at a Deployment's dry run.
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		}}}
		if err := env.Client.Create(context.Background(), o); err != nil {
			fmt.Fprintln(os.Stderr, "namespace:", err)
			return 1
		}
	}
	return m.Run()
}
