package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// DefaultNodeName is the name of the Node the local node registers.
const DefaultNodeName = "local"

// TerminationMessageEnv names the file a process may write its termination
// message to. The container's terminationMessagePath is a path inside an
// image the local node does not use, so the process is told where instead.
const TerminationMessageEnv = "TERMINATION_MESSAGE_PATH"

// Node is a kubelet for one machine without containers: it registers a Node,
// binds the pods it is given, runs each container's command as a local
// process and reports pod status as a kubelet would.
type Node struct {
	// Config reaches the API server; the node needs pods, pods/binding,
	// pods/status, nodes, nodes/status, and configmaps/secrets for env.
	Config *rest.Config
	// Name of the Node; default DefaultNodeName.
	Name string
	// DataDir holds pods/<namespace>_<pod>/ with each container's log and the
	// processes' working directory.
	DataDir string
	// MaxPods bounds the pods whose processes run at once; others wait. Default 8.
	MaxPods int
	// Selector picks the pods this node binds and runs; default flyte.org/managed=true.
	Selector string
	// Heartbeat is how often the Node's Ready condition is renewed; default 10s.
	Heartbeat time.Duration
	// MaxGrace caps a deleted pod's grace period before its processes are killed; default 10s.
	MaxGrace time.Duration
	// LogsAddr is where the kubelet-style log endpoint (for kubectl logs)
	// listens; default 127.0.0.1:0. "-" disables it.
	LogsAddr string
	Log      logr.Logger

	cs     kubernetes.Interface
	lister corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	sem    chan struct{}
	ready  chan struct{}
	once   sync.Once

	mu   sync.Mutex
	runs map[string]*podRun // by namespace/name; finished runs stay until the pod is gone
	wg   sync.WaitGroup
}

// podRun is the processes of one pod.
type podRun struct {
	uid    types.UID
	ctx    context.Context
	cancel context.CancelFunc
	grace  atomic.Int64 // set before cancel: how long SIGTERM has before SIGKILL
	done   chan struct{}
}

func (r *podRun) stop(grace time.Duration) {
	r.grace.Store(int64(grace))
	r.cancel()
}

func (r *podRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (n *Node) defaults() {
	n.once.Do(func() {
		if n.Name == "" {
			n.Name = DefaultNodeName
		}
		if n.MaxPods <= 0 {
			n.MaxPods = 8
		}
		if n.Selector == "" {
			n.Selector = "flyte.org/managed=true"
		}
		if n.Heartbeat <= 0 {
			n.Heartbeat = 10 * time.Second
		}
		if n.MaxGrace <= 0 {
			n.MaxGrace = 10 * time.Second
		}
		if n.LogsAddr == "" {
			n.LogsAddr = loopbackIP + ":0"
		}
		if n.Log.GetSink() == nil {
			n.Log = logr.Discard()
		}
		n.sem = make(chan struct{}, n.MaxPods)
		n.ready = make(chan struct{})
		n.runs = map[string]*podRun{}
	})
}

// Ready is closed once the Node is registered and the pod cache synced.
func (n *Node) Ready() <-chan struct{} {
	n.defaults()
	return n.ready
}

// PodDir is where a pod's logs and working directory are.
func (n *Node) PodDir(namespace, pod string) string {
	return filepath.Join(n.DataDir, "pods", namespace+"_"+pod)
}

// LogPath is the file holding a container's stdout and stderr.
func (n *Node) LogPath(namespace, pod, container string) string {
	return filepath.Join(n.PodDir(namespace, pod), container+".log")
}

// Start runs the node until ctx ends, then kills every process it started
// and returns once they are gone.
func (n *Node) Start(ctx context.Context) error {
	n.defaults()
	if n.DataDir == "" {
		return errors.New("local node: DataDir is required")
	}
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return fmt.Errorf("local node: %w", err)
	}
	n.cs = cs
	n.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())

	logsPort := int32(0)
	var logsDone chan error
	if n.LogsAddr != "-" {
		ln, srv, err := n.logServer()
		if err != nil {
			return err
		}
		logsPort = int32(ln.Addr().(*net.TCPAddr).Port)
		logsDone = make(chan error, 1)
		go func() { logsDone <- srv.ServeTLS(ln, "", "") }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-logsDone
		}()
	}
	if err := n.register(ctx, logsPort); err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = n.Selector }))
	inf := factory.Core().V1().Pods()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("local node: %w", err)
	}
	n.lister = inf.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	close(n.ready)
	n.Log.Info("local node ready", "node", n.Name, "pods", filepath.Join(n.DataDir, "pods"))

	var workers sync.WaitGroup
	for range 2 {
		workers.Go(func() {
			for n.processNext(ctx) {
			}
		})
	}
	hb := time.NewTicker(n.Heartbeat)
	defer hb.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-hb.C:
			if err := n.heartbeat(ctx); err != nil && ctx.Err() == nil {
				n.Log.Error(err, "node heartbeat failed")
			}
		}
	}
	n.queue.ShutDown()
	workers.Wait()
	n.mu.Lock()
	for _, r := range n.runs {
		r.stop(2 * time.Second)
	}
	n.mu.Unlock()
	waited := make(chan struct{})
	go func() { n.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(n.MaxGrace + 10*time.Second):
		return errors.New("local node: processes did not stop")
	}
	return nil
}

func (n *Node) processNext(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	if err := n.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			n.Log.Error(err, "sync pod", "pod", key)
		}
		n.queue.AddRateLimited(key)
		return true
	}
	n.queue.Forget(key)
	return true
}

func (n *Node) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := n.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone without passing through graceful deletion (grace 0 or forced): kill at once.
		n.mu.Lock()
		if r := n.runs[key]; r != nil {
			r.stop(0)
			delete(n.runs, key)
		}
		n.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp != nil {
			return nil
		}
		return n.bind(ctx, pod)
	}
	if pod.Spec.NodeName != n.Name {
		return nil
	}
	n.mu.Lock()
	r := n.runs[key]
	if r != nil && r.uid != pod.UID { // same name, new pod
		r.stop(0)
		delete(n.runs, key)
		r = nil
	}
	n.mu.Unlock()

	if pod.DeletionTimestamp != nil {
		if r != nil && !r.finished() {
			// The run re-queues the pod when its processes are gone.
			r.stop(n.grace(pod))
			return nil
		}
		return n.finishDeletion(ctx, pod)
	}
	if r != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	if pod.Status.Phase == corev1.PodRunning {
		// Started by an earlier node process whose processes died with it.
		return n.markLost(ctx, pod)
	}
	rctx, cancel := context.WithCancel(ctx)
	r = &podRun{uid: pod.UID, ctx: rctx, cancel: cancel, done: make(chan struct{})}
	n.mu.Lock()
	n.runs[key] = r
	n.mu.Unlock()
	n.wg.Add(1)
	go n.runPod(ctx, key, r, pod.DeepCopy())
	return nil
}

func (n *Node) grace(pod *corev1.Pod) time.Duration {
	g := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		g = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	return min(g, n.MaxGrace)
}

func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	err := n.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.Name},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or bound meanwhile: the watch brings the news
	}
	if err != nil {
		return fmt.Errorf("bind to node %s: %w", n.Name, err)
	}
	return nil
}

// finishDeletion is the kubelet's last step of a graceful deletion: the
// processes are gone, so the pod object may go too.
func (n *Node) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	err := n.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("finish deletion: %w", err)
	}
	return nil
}

func (n *Node) markLost(ctx context.Context, pod *corev1.Pod) error {
	now := time.Now()
	var states []containerState
	for _, c := range pod.Spec.Containers {
		states = append(states, containerState{Name: c.Name, Image: c.Image, Finished: now, ExitCode: 137, Reason: "Error",
			Message: "the local node restarted and lost this container's process"})
	}
	return n.writeStatus(ctx, pod, states)
}

// writeStatus replaces the pod's status as its kubelet; a pod that is gone
// or replaced is not an error.
func (n *Node) writeStatus(ctx context.Context, pod *corev1.Pod, states []containerState) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := n.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		cur.Status = podStatus(cur.Status, cur.Generation, states, time.Now())
		_, err = n.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// proc is one container's process.
type proc struct {
	i    int
	cmd  *exec.Cmd
	log  *os.File
	term string // termination message file
}

func (n *Node) runPod(ctx context.Context, key string, r *podRun, pod *corev1.Pod) {
	defer n.wg.Done()
	defer n.queue.Add(key) // a deletion may wait for this run to end
	defer close(r.done)
	log := n.Log.WithValues("pod", key)

	states := make([]containerState, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		states[i] = containerState{Name: c.Name, Image: c.Image}
	}
	failAll := func(reason, msg string) {
		now := time.Now()
		for i := range states {
			states[i].Finished, states[i].ExitCode, states[i].Reason, states[i].Message = now, 128, reason, msg
		}
		if err := n.writeStatus(ctx, pod, states); err != nil && ctx.Err() == nil {
			log.Error(err, "write pod status")
		}
	}
	if len(pod.Spec.InitContainers) > 0 {
		failAll("StartError", "executor local does not run init containers")
		return
	}

	// Env comes first: like a kubelet, wait (and say why) while a referenced
	// ConfigMap or Secret is missing.
	var envs [][]string
	var argvs [][]string
	for {
		var err error
		envs, argvs, err = n.prepare(ctx, pod)
		if err == nil {
			break
		}
		var nr noRun
		if errors.As(err, &nr) {
			failAll("StartError", err.Error())
			return
		}
		for i := range states {
			states[i].Waiting, states[i].WaitingMessage = "CreateContainerConfigError", err.Error()
		}
		if werr := n.writeStatus(ctx, pod, states); werr != nil && ctx.Err() == nil {
			log.Error(werr, "write pod status")
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}

	select {
	case n.sem <- struct{}{}:
	case <-r.ctx.Done():
		return
	}
	defer func() { <-n.sem }()

	dir := n.PodDir(pod.Namespace, pod.Name)
	work := filepath.Join(dir, "work")
	// A pod name is reused by a new pod in a new control plane: start clean.
	if err := os.RemoveAll(dir); err != nil {
		failAll("StartError", err.Error())
		return
	}
	if err := os.MkdirAll(work, 0o750); err != nil {
		failAll("StartError", err.Error())
		return
	}

	var procs []*proc
	for i, c := range pod.Spec.Containers {
		p, err := startProcess(i, c.Name, dir, work, envs[i], argvs[i])
		if err != nil {
			states[i].Finished, states[i].ExitCode, states[i].Reason, states[i].Message = time.Now(), 128, "StartError", err.Error()
			continue
		}
		states[i].PID, states[i].Started = p.cmd.Process.Pid, time.Now()
		procs = append(procs, p)
		log.Info("container started", "container", c.Name, "pid", p.cmd.Process.Pid, "log", p.log.Name())
	}
	if len(procs) > 0 {
		if err := n.writeStatus(ctx, pod, states); err != nil && ctx.Err() == nil {
			log.Error(err, "write pod status")
		}
	}

	type exit struct {
		i    int
		code int32
		at   time.Time
	}
	exits := make(chan exit, len(procs))
	for _, p := range procs {
		go func() {
			_ = p.cmd.Wait()
			at := time.Now()
			// The container ends with its main process, as in a cgroup:
			// nothing it started may outlive it.
			killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			_ = p.log.Close()
			exits <- exit{p.i, exitCode(p.cmd.ProcessState), at}
		}()
	}
	signalAll := func(sig syscall.Signal) {
		for _, p := range procs {
			killGroup(p.cmd.Process.Pid, sig)
		}
	}
	stopping := r.ctx.Done()
	var kill <-chan time.Time
	for left := len(procs); left > 0; {
		select {
		case e := <-exits:
			left--
			states[e.i].Finished, states[e.i].ExitCode, states[e.i].Reason = e.at, e.code, exitReason(e.code)
		case <-stopping:
			stopping = nil
			signalAll(syscall.SIGTERM)
			kill = time.After(time.Duration(r.grace.Load()))
		case <-kill:
			kill = nil
			signalAll(syscall.SIGKILL)
		}
	}
	for _, p := range procs {
		s := &states[p.i]
		file, _ := os.ReadFile(p.term)
		logBytes, _ := readTail(p.log.Name(), maxFallbackBytes)
		s.Message = terminationMessage(file, logBytes, pod.Spec.Containers[p.i].TerminationMessagePolicy, s.ExitCode)
		log.Info("container exited", "container", s.Name, "exitCode", s.ExitCode, "log", p.log.Name())
	}
	if ctx.Err() != nil {
		return // the node is stopping: the API server may already be gone
	}
	if err := n.writeStatus(ctx, pod, states); err != nil {
		log.Error(err, "write pod status")
	}
}

// noRun is an error that retrying cannot fix: the container cannot run here.
type noRun struct{ error }

// prepare computes each container's environment and command line.
func (n *Node) prepare(ctx context.Context, pod *corev1.Pod) (envs, argvs [][]string, err error) {
	one := func(kind, ns, name, key string) (string, bool, error) {
		m, found, err := n.readRef(ctx, kind, ns, name)
		if err != nil || !found {
			return "", found, err
		}
		v, ok := m[key]
		return v, ok, nil
	}
	all := func(kind, ns, name string) (map[string]string, bool, error) { return n.readRef(ctx, kind, ns, name) }
	dir := n.PodDir(pod.Namespace, pod.Name)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		base := map[string]string{
			"PATH":                os.Getenv("PATH"),
			"HOME":                filepath.Join(dir, "work"),
			"HOSTNAME":            pod.Name,
			TerminationMessageEnv: filepath.Join(dir, c.Name+".termination-log"),
		}
		if base["PATH"] == "" {
			base["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		}
		env, err := containerEnv(pod, c, base, one, all)
		if err != nil {
			return nil, nil, err
		}
		av, err := argv(c, env)
		if err != nil {
			return nil, nil, noRun{err}
		}
		envs, argvs = append(envs, env), append(argvs, av)
	}
	return envs, argvs, nil
}

func (n *Node) readRef(ctx context.Context, kind, ns, name string) (map[string]string, bool, error) {
	switch kind {
	case "configmap":
		cm, err := n.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		m := map[string]string{}
		for k, v := range cm.Data {
			m[k] = v
		}
		for k, v := range cm.BinaryData {
			m[k] = string(v)
		}
		return m, true, nil
	case "secret":
		s, err := n.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		m := map[string]string{}
		for k, v := range s.Data {
			m[k] = string(v)
		}
		return m, true, nil
	}
	return nil, false, fmt.Errorf("unknown kind %s", kind)
}

func startProcess(i int, name, dir, work string, env, av []string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(av[0], av[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_, _ = fmt.Fprintf(logf, "executor local: cannot start %q: %v\n", av[0], err)
		_ = logf.Close()
		return nil, err
	}
	return &proc{i: i, cmd: cmd, log: logf, term: filepath.Join(dir, name+".termination-log")}, nil
}

// exitCode is the container's exit code; a signal counts as 128+signal, as in a container runtime.
func exitCode(ps *os.ProcessState) int32 {
	if ps == nil {
		return 128
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int32(128 + int(ws.Signal()))
	}
	return int32(ps.ExitCode())
}

// readTail is the last max bytes of a file.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max64(st.Size()-max, 0)
	b := make([]byte, st.Size()-off)
	_, err = f.ReadAt(b, off)
	return b, err
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func (n *Node) register(ctx context.Context, logsPort int32) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
		"kubernetes.io/hostname": n.Name, "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
		"node.kubernetes.io/instance-type": "local",
	}}}
	cur, err := n.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, err = n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("local node: register Node %s: %w", n.Name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(n.MaxPods), resource.DecimalSI),
	}
	cur.Status.Capacity, cur.Status.Allocatable = res, res
	cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: loopbackIP}}
	cur.Status.DaemonEndpoints.KubeletEndpoint.Port = logsPort
	cur.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
		KubeletVersion: "executor-local", ContainerRuntimeVersion: "local://process",
	}
	cur.Status.Conditions = readyCondition(time.Now())
	if _, err := n.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("local node: Node %s status: %w", n.Name, err)
	}
	return nil
}

func (n *Node) heartbeat(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		for i := range cur.Status.Conditions {
			if cur.Status.Conditions[i].Type == corev1.NodeReady {
				cur.Status.Conditions[i].LastHeartbeatTime = now
			}
		}
		_, err = n.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func readyCondition(now time.Time) []corev1.NodeCondition {
	t := metav1.NewTime(now)
	return []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "executor local runs pods as local processes", LastHeartbeatTime: t, LastTransitionTime: t,
	}}
}

// memTotal is the machine's memory from /proc/meminfo, or 8Gi if unknown.
func memTotal() int64 {
	const fallback = 8 << 30
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallback
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return fallback
}
