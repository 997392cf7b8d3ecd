package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
