package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// controllerUser is the identity of the controller under test (executor or
// floor): a ServiceAccount-shaped user, so that API Priority and Fairness
// treats it as it would the executor's ServiceAccount in a cluster.
const (
	controllerUser  = "system:serviceaccount:executor-system:executor"
	benchNamespace  = "default"
	fakeNodeAnnoKey = "kwok.x-k8s.io/node"
)

// rig is one fresh control plane with its scheduler, kwok and fake nodes.
type rig struct {
	dir                    string
	env                    *envtest.Environment
	admin                  *rest.Config
	adminKC                string // kubeconfig file of the admin (system:masters)
	ctrlKC                 string // kubeconfig file of controllerUser
	procs                  []*proc
	cpLog                  *os.File
	nodeUntaintedByHarness bool
}

func startRig(ctx context.Context, o options, dir string) (r *rig, err error) {
	r = &rig{dir: dir}
	defer func() {
		if err != nil {
			r.stop()
			r = nil
		}
	}()
	r.cpLog, err = os.Create(filepath.Join(dir, "control-plane.log"))
	if err != nil {
		return r, err
	}
	r.env = &envtest.Environment{
		BinaryAssetsDirectory:    o.K8sBin,
		CRDDirectoryPaths:        []string{filepath.Join(o.Root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := r.env.ControlPlane.GetAPIServer()
	api.Out, api.Err = r.cpLog, r.cpLog
	r.env.ControlPlane.Etcd = &envtest.Etcd{Out: r.cpLog, Err: r.cpLog}
	if _, err := r.env.Start(); err != nil {
		return r, fmt.Errorf("start the control plane (log %s): %w", r.cpLog.Name(), err)
	}
	admin, err := r.env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return r, err
	}
	r.admin = admin.Config()
	kc, err := admin.KubeConfig()
	if err != nil {
		return r, err
	}
	r.adminKC = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(r.adminKC, kc, 0o600); err != nil {
		return r, err
	}
	if err := installRBAC(ctx, r.admin, filepath.Join(o.Root, "config", "rbac"), controllerUser); err != nil {
		return r, err
	}
	u, err := r.env.AddUser(envtest.User{Name: controllerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:executor-system", "system:authenticated"}}, nil)
	if err != nil {
		return r, err
	}
	if kc, err = u.KubeConfig(); err != nil {
		return r, err
	}
	r.ctrlKC = filepath.Join(dir, "controller.kubeconfig")
	if err := os.WriteFile(r.ctrlKC, kc, 0o600); err != nil {
		return r, err
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
`, r.adminKC)), 0o600); err != nil {
		return r, err
	}
	port, err := freePort()
	if err != nil {
		return r, err
	}
	sched, err := startProc(ctx, "kube-scheduler", filepath.Join(dir, "kube-scheduler.log"),
		filepath.Join(o.K8sBin, "kube-scheduler"), "--config="+schedCfg, "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port), "--v=1")
	if err != nil {
		return r, err
	}
	r.procs = append(r.procs, sched)

	// kwok with the bench's stages, delays filled in.
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
	kport, err := freePort()
	if err != nil {
		return r, err
	}
	kw, err := startProc(ctx, "kwok", filepath.Join(dir, "kwok.log"), o.KwokBin,
		"--kubeconfig="+r.adminKC, "--config="+strings.Join(cfgs, ","),
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

// addNodes creates the fake nodes and waits until they are Ready and untainted.
func (r *rig) addNodes(ctx context.Context, n int) error {
	c, err := client.New(r.admin, client.Options{Scheme: setup.Scheme()})
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
			logf("%d nodes ready and untainted", n)
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
				r.nodeUntaintedByHarness = true
				logf("the node-untaint stage did not run: the harness removed the taints")
				return nil
			}
			return fmt.Errorf("nodes: %d of %d ready, %d tainted after 60s (kwok log: %s)", ready, n, tainted, filepath.Join(r.dir, "kwok.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (r *rig) stop() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop(10 * time.Second)
	}
	r.procs = nil
	if r.env != nil {
		if err := r.env.Stop(); err != nil {
			logf("stop the control plane: %v", err)
		}
		r.env = nil
	}
	if r.cpLog != nil {
		_ = r.cpLog.Close()
	}
}

// installRBAC creates the ClusterRoles of config/rbac and binds each to user,
// so that the controller under test runs with the executor's deployed rights.
func installRBAC(ctx context.Context, cfg *rest.Config, dir, user string) error {
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			var role rbacv1.ClusterRole
			if err := dec.Decode(&role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if role.Kind != "ClusterRole" || role.Name == "" || role.AggregationRule != nil {
				continue
			}
			role.ResourceVersion = ""
			if err := c.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("ClusterRole %s: %w", role.Name, err)
			}
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "bench-" + role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}
			if err := c.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("bind ClusterRole %s: %w", role.Name, err)
			}
		}
	}
	return nil
}

// proc is a subprocess in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func startProc(_ context.Context, name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if !p.exited() {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			logf("%s did not stop within %s: killing it", p.name, grace)
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			<-p.done
		}
	}
	_ = p.log.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string, d time.Duration, p *proc) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited: %v (log %s)", p.name, p.err, p.log.Name())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %v", url, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitTCP waits until addr accepts connections.
func waitTCP(ctx context.Context, addr string, d time.Duration, p *proc) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited: %v (log %s)", p.name, p.err, p.log.Name())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after %s", p.name, addr, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
