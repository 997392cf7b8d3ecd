package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/taskaction/executor/pkg/setup"
)

type controlPlane struct {
	env        *envtest.Environment
	admin      *rest.Config // system:masters: the node, the demo, the printed kubeconfig
	executor   *rest.Config // bound to the project's ClusterRoles
	kubeconfig []byte
	logs       *os.File
	rbac       []string
	scraper    bool // the metrics-scraper ServiceAccount exists
}

// metricsReaderRole is the ClusterRole a metrics scraper needs (config/rbac).
const metricsReaderRole = "metrics-reader"

// scraperSA is a ServiceAccount allowed to read the executor's metrics, so
// that `kubectl create token` gives a bearer token the metrics server accepts.
const scraperSA = "metrics-scraper"

func addScraper(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraperSA, Namespace: "default"}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount %s: %w", scraperSA, err)
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "executor-local-" + scraperSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraperSA, Namespace: "default"}},
	}
	if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind ServiceAccount %s: %w", scraperSA, err)
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// startControlPlane starts etcd and kube-apiserver (their state in temporary
// directories envtest removes on Stop), installs the CRDs and the RBAC, and
// makes the identities.
func startControlPlane(o Options, assets string) (_ *controlPlane, err error) {
	logs, err := os.OpenFile(filepath.Join(o.DataDir, "control-plane.log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("data directory %s is not writable: %w", o.DataDir, err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{filepath.Join(o.Root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if o.Config.Webhook.Active() {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(o.Root, "config", "webhook", "manifests.yaml")},
			LocalServingHost: loopbackIP,
		}
	}
	api := env.ControlPlane.GetAPIServer()
	api.Out, api.Err = logs, logs
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = logs, logs
	cp := &controlPlane{env: env, logs: logs}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		_ = logs.Close()
		return nil, fmt.Errorf("start the control plane (log: %s): %w", logs.Name(), err)
	}
	defer func() {
		if err != nil {
			_ = env.Stop()
			_ = logs.Close()
		}
	}()
	admin, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("control plane: admin user: %w", err)
	}
	cp.admin = admin.Config()
	if cp.kubeconfig, err = admin.KubeConfig(); err != nil {
		return nil, fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	const executorUser = "executor"
	roles, err := installRBAC(cp.admin, filepath.Join(o.Root, "config", "rbac"), executorUser)
	if err != nil {
		return nil, err
	}
	cp.rbac = roles
	if contains(roles, metricsReaderRole) {
		if err := addScraper(cp.admin); err != nil {
			return nil, err
		}
		cp.scraper = true
	}
	if len(roles) == 0 {
		// Nothing to bind: run as admin rather than with no rights at all.
		cp.executor = cp.admin
		return cp, nil
	}
	u, err := env.AddUser(envtest.User{Name: executorUser}, nil)
	if err != nil {
		return nil, fmt.Errorf("control plane: executor user: %w", err)
	}
	cp.executor = u.Config()
	return cp, nil
}

// installRBAC creates the ClusterRoles of config/rbac and binds each to user,
// so that the executor runs with the rights it is deployed with.
func installRBAC(cfg *rest.Config, dir, user string) ([]string, error) {
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			var role rbacv1.ClusterRole
			if err := dec.Decode(&role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if role.Kind != "ClusterRole" || role.Name == "" || role.AggregationRule != nil {
				continue
			}
			role.ResourceVersion = ""
			if err := c.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("install ClusterRole %s from %s: %w", role.Name, f, err)
			}
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "executor-local-" + role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}
			if err := c.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("bind ClusterRole %s: %w", role.Name, err)
			}
			names = append(names, role.Name)
		}
	}
	return names, nil
}
