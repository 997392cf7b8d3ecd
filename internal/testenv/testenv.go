// Package testenv starts a real control plane (the project's kube-apiserver and
// etcd from bin/k8s) for envtest suites. Start it once per package, in TestMain.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/taskaction/executor/pkg/setup"
)

// Env is a running control plane with the TaskAction CRD installed.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
	Root   string
}

// Root returns the module root (the directory holding go.mod).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "api")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("module root not found")
		}
		dir = parent
	}
}

// Start starts kube-apiserver and etcd and installs the CRDs from config/crd/bases.
// Each option adjusts the environment before it starts (e.g. its WebhookInstallOptions).
func Start(opts ...func(*envtest.Environment)) (*Env, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make envtest` to build the control plane", b, assets)
		}
	}
	timeout := 60 * time.Second
	if v := os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c, Root: root}, nil
}
