// Package kwokrig runs a control plane for black-box runs of the executor:
// etcd and kube-apiserver (envtest, from bin/k8s), kube-scheduler, and kwok
// with the Stages of stages/ walking the executor's pods through their lives
// on fake nodes. The benchmark (bench/) and the fault suites (test/faults)
// both run on it.
package kwokrig

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/taskaction/executor/pkg/setup"
)

//go:embed stages/*.yaml
var stageFiles embed.FS

// ControllerUser is the identity of the controller under test: a
// ServiceAccount-shaped user, so that API Priority and Fairness treats it as
// it would the executor's ServiceAccount in a cluster.
const ControllerUser = "system:serviceaccount:executor-system:executor"

// What the Stages read on a TaskAction pod (set through the TaskAction's
// podTemplate annotations).
const (
	// FailAnnotation: FailEveryAttempt makes every attempt's pod fail (exit
	// code 1); FailFirstAttempt only attempt 1's (the pod's label attempt).
	FailAnnotation   = "bench.flyte.org/fail"
	FailEveryAttempt = "true"
	FailFirstAttempt = "first-attempt"
	// HoldAnnotation "true" keeps the pod Running until it is deleted.
	HoldAnnotation = "bench.flyte.org/hold"
)

const fakeNodeAnnoKey = "kwok.x-k8s.io/node"

// Options say what to run.
type Options struct {
	// Root is the module root: CRDs from config/crd/bases, RBAC from config/rbac.
	Root string
	// K8sBin holds kube-apiserver, etcd and kube-scheduler.
	K8sBin  string
	KwokBin string
	Nodes   int
	// RunDelay: bound pod Pending → Running; FinishDelay: Running → Succeeded/Failed.
	RunDelay, FinishDelay time.Duration
	// ControllerUsers get the executor's RBAC, each its own kubeconfig
	// (default: ControllerUser alone). Several let an audit log tell replicas apart.
	ControllerUsers []string
	// RoleNamespace receives the namespaced Roles of config/rbac (leader
	// election), bound to the controller users; empty: not installed.
	RoleNamespace string
	// AuditPolicy, if set, is the API server's audit policy (YAML); the log is
	// Rig.AuditLog, one JSON event per line.
	AuditPolicy string
	// Logf reports progress; nil: silent.
	Logf func(format string, args ...any)
}

// Rig is one fresh control plane with its scheduler, kwok and fake nodes.
type Rig struct {
	Dir string
	Env *envtest.Environment
	// Admin is a system:masters client configuration; AdminKubeconfig the same as a file.
	Admin           *rest.Config
	AdminKubeconfig string
	// Kubeconfigs maps each controller user to its kubeconfig file.
	Kubeconfigs map[string]string
	// AuditLog is the API server's audit log ("" without Options.AuditPolicy).
	AuditLog string
	// NodesUntaintedByHarness: the node-untaint stage did not run and the rig removed the taints.
	NodesUntaintedByHarness bool

	o     Options
	procs []*Proc
	cpLog *os.File
}

// Start brings the rig up in dir (which it does not remove).
func Start(ctx context.Context, o Options, dir string) (r *Rig, err error) {
	if len(o.ControllerUsers) == 0 {
		o.ControllerUsers = []string{ControllerUser}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	r = &Rig{Dir: dir, o: o, Kubeconfigs: map[string]string{}}
	defer func() {
		if err != nil {
			r.Stop()
			r = nil
		}
	}()
	r.cpLog, err = os.Create(filepath.Join(dir, "control-plane.log"))
	if err != nil {
		return r, err
	}
	r.Env = &envtest.Environment{
		BinaryAssetsDirectory:    o.K8sBin,
		CRDDirectoryPaths:        []string{filepath.Join(o.Root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := r.Env.ControlPlane.GetAPIServer()
	api.Out, api.Err = r.cpLog, r.cpLog
	// A certificate directory of our own survives RestartAPIServer (envtest
	// wipes one it allocated), so the port, serving certificate and client CA
	// stay, and every kubeconfig handed out keeps working.
	api.CertDir = filepath.Join(dir, "apiserver")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return r, err
	}
	if o.AuditPolicy != "" {
		policy := filepath.Join(dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(o.AuditPolicy), 0o600); err != nil {
			return r, err
		}
		r.AuditLog = filepath.Join(dir, "audit.log")
		api.Configure().Set("audit-policy-file", policy).Set("audit-log-path", r.AuditLog).
			Set("audit-log-format", "json").Set("audit-log-mode", "blocking")
	}
	r.Env.ControlPlane.Etcd = &envtest.Etcd{Out: r.cpLog, Err: r.cpLog}
	if _, err := r.Env.Start(); err != nil {
		return r, fmt.Errorf("start the control plane (log %s): %w", r.cpLog.Name(), err)
	}
	admin, err := r.Env.AddUser(envtest.User{Name: "rig-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return r, err
	}
	r.Admin = admin.Config()
	kc, err := admin.KubeConfig()
	if err != nil {
		return r, err
	}
	r.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(r.AdminKubeconfig, kc, 0o600); err != nil {
		return r, err
	}
	if err := installRBAC(ctx, r.Admin, filepath.Join(o.Root, "config", "rbac"), o.ControllerUsers, o.RoleNamespace); err != nil {
		return r, err
	}
	for i, user := range o.ControllerUsers {
		u, err := r.Env.AddUser(envtest.User{Name: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:executor-system", "system:authenticated"}}, nil)
		if err != nil {
			return r, err
		}
		if kc, err = u.KubeConfig(); err != nil {
			return r, err
		}
		p := filepath.Join(dir, fmt.Sprintf("controller-%d.kubeconfig", i))
		if err := os.WriteFile(p, kc, 0o600); err != nil {
			return r, err
		}
		r.Kubeconfigs[user] = p
	}

	// kube-scheduler: client limits raised (its 50/100 default caps binding
	// near 50 pods/s); no authentication/authorization kubeconfig flags
	// (envtest has no request-header CA).
	schedCfg := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(schedCfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, r.AdminKubeconfig)), 0o600); err != nil {
		return r, err
	}
	port, err := FreePort()
	if err != nil {
		return r, err
	}
	sched, err := StartProc("kube-scheduler", filepath.Join(dir, "kube-scheduler.log"),
		filepath.Join(o.K8sBin, "kube-scheduler"), "--config="+schedCfg, "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port), "--v=1")
	if err != nil {
		return r, err
	}
	r.procs = append(r.procs, sched)

	// kwok with the stages, delays filled in.
	var cfgs []string
	entries, _ := stageFiles.ReadDir("stages")
	for _, e := range entries {
		b, _ := stageFiles.ReadFile("stages/" + e.Name())
		s := strings.ReplaceAll(string(b), "__RUN_DELAY_MS__", strconv.FormatInt(o.RunDelay.Milliseconds(), 10))
		s = strings.ReplaceAll(s, "__FINISH_DELAY_MS__", strconv.FormatInt(o.FinishDelay.Milliseconds(), 10))
		p := filepath.Join(dir, "stage-"+e.Name())
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			return r, err
		}
		cfgs = append(cfgs, p)
	}
	kport, err := FreePort()
	if err != nil {
		return r, err
	}
	kw, err := StartProc("kwok", filepath.Join(dir, "kwok.log"), o.KwokBin,
		"--kubeconfig="+r.AdminKubeconfig, "--config="+strings.Join(cfgs, ","),
		"--manage-nodes-with-annotation-selector="+fakeNodeAnnoKey+"=fake",
		"--cidr=10.0.0.1/16", "--node-ip=10.255.0.1", "--server-address=127.0.0.1:"+strconv.Itoa(kport), "--v=WARN")
	if err != nil {
		return r, err
	}
	r.procs = append(r.procs, kw)

	if err := r.addNodes(ctx, o.Nodes); err != nil {
		return r, err
	}
	return r, nil
}

// Kubeconfig is the kubeconfig file of the first controller user.
func (r *Rig) Kubeconfig() string { return r.Kubeconfigs[r.o.ControllerUsers[0]] }

// RestartAPIServer stops kube-apiserver (etcd keeps running), waits down, and
// starts it again on the same port with the same certificates.
func (r *Rig) RestartAPIServer(ctx context.Context, down time.Duration) error {
	api := r.Env.ControlPlane.GetAPIServer()
	if err := api.Stop(); err != nil {
		// With watches open kube-apiserver may not finish a graceful stop
		// within the stop timeout; envtest then kills it, as a kubelet would
		// after the grace period, and the restart goes on.
		if !strings.Contains(err.Error(), "timeout waiting for process") {
			return fmt.Errorf("stop kube-apiserver: %w", err)
		}
		r.o.Logf("kube-apiserver did not stop within %s of SIGTERM: killed", r.Env.ControlPlaneStopTimeout)
	}
	if err := sleep(ctx, down); err != nil {
		return err
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver again (log %s): %w", r.cpLog.Name(), err)
	}
	return nil
}

// addNodes creates the fake nodes and waits until they are Ready and untainted.
func (r *Rig) addNodes(ctx context.Context, n int) error {
	c, err := client.New(r.Admin, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return err
	}
	for i := range n {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{fakeNodeAnnoKey: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		}}
		if err := c.Create(ctx, node); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return err
		}
		ready, tainted := 0, 0
		for _, nd := range nodes.Items {
			for _, cond := range nd.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
			if len(nd.Spec.Taints) > 0 {
				tainted++
			}
		}
		if ready == n && tainted == 0 {
			r.o.Logf("%d nodes ready and untainted", n)
			return nil
		}
		if time.Now().After(deadline) {
			if ready == n {
				// The untaint stage did not run: do it here, and say so.
				for _, nd := range nodes.Items {
					if len(nd.Spec.Taints) == 0 {
						continue
					}
					if err := c.Patch(ctx, &nd, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":null}}`))); err != nil {
						return err
					}
				}
				r.NodesUntaintedByHarness = true
				r.o.Logf("the node-untaint stage did not run: the harness removed the taints")
				return nil
			}
			return fmt.Errorf("nodes: %d of %d ready, %d tainted after 60s (kwok log: %s)", ready, n, tainted, filepath.Join(r.Dir, "kwok.log"))
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// Stop stops kwok, the scheduler and the control plane.
func (r *Rig) Stop() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].Stop(10 * time.Second)
	}
	r.procs = nil
	if r.Env != nil {
		if err := r.Env.Stop(); err != nil {
			r.o.Logf("stop the control plane: %v", err)
		}
		r.Env = nil
	}
	if r.cpLog != nil {
		_ = r.cpLog.Close()
	}
}

// installRBAC creates the ClusterRoles of config/rbac and binds each to
// users, and, with ns set, the Roles in ns, so that the controller under test
// runs with the executor's deployed rights.
func installRBAC(ctx context.Context, cfg *rest.Config, dir string, users []string, ns string) error {
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return err
	}
	var subjects []rbacv1.Subject
	for _, u := range users {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	if ns != "" {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			var role rbacv1.ClusterRole // a Role decodes into it too: same fields
			if err := dec.Decode(&role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if role.Name == "" || role.AggregationRule != nil {
				continue
			}
			ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: role.Kind, Name: role.Name}
			var obj, binding client.Object
			switch {
			case role.Kind == "ClusterRole":
				obj = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Rules: role.Rules}
				binding = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rig-" + role.Name}, RoleRef: ref, Subjects: subjects}
			case role.Kind == "Role" && ns != "":
				obj = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns}, Rules: role.Rules}
				binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rig-" + role.Name, Namespace: ns}, RoleRef: ref, Subjects: subjects}
			default:
				continue
			}
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s %s: %w", role.Kind, role.Name, err)
			}
			if err := c.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("bind %s %s: %w", role.Kind, role.Name, err)
			}
		}
	}
	return nil
}
