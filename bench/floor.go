package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/task"
)

// runFloor is the reference controller: for each TaskAction it creates the
// pod once and, when the pod ends, writes the terminal condition once (a
// merge patch of the status, which cannot conflict). Nothing else: no
// finalizer, no events, no intermediate phases. A task with retries gets the
// next attempt's pod when a pod fails, and the condition only at the end. It counts its requests with
// the executor's own instrumentation (executor_api_requests_total), served on
// --metrics-addr, so both controllers are measured the same way.
func runFloor(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:0", "metrics listen address")
	qps := fs.Float64("qps", 100, "client QPS")
	burst := fs.Int("burst", 200, "client burst")
	workers := fs.Int("workers", 64, "reconcile workers")
	namespace := fs.String("namespace", "", "the one namespace to cache and reconcile (as the executor's namespaces); empty: every namespace")
	pprofAddr := fs.String("pprof-addr", "", "serve net/http/pprof here (the profiles of goal 3); empty: not served")
	pod := fs.String("pod", floorPodMinimal, "the pod it creates: "+floorPodMinimal+" (floorPod) or "+floorPodExecutor+" (the executor's own, at its default configuration: Flyte's environment, labels and default resources)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	build, err := floorPodBuilder(*pod)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	cfg.UserAgent = "bench-floor"
	metrics.InstrumentRESTConfig(cfg)
	// client-go's time waiting on the client-side rate limiter, which tells
	// whether --qps bound the floor.
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRateLimiterLatency)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	scheme := setup.Scheme()
	co := cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{setup.ManagedLabel: "true"})},
	}}
	if *namespace != "" {
		co.DefaultNamespaces = map[string]cache.Config{*namespace: {}}
	}
	c, err := cache.New(cfg, co)
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	f := &floor{cache: c, client: cl, build: build,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())}

	taInf, err := c.GetInformer(ctx, &flytev1.TaskAction{})
	if err != nil {
		return err
	}
	enqueueTA := func(obj any) {
		if o, ok := obj.(client.Object); ok {
			f.queue.Add(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	if _, err := taInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueueTA, UpdateFunc: func(_, n any) { enqueueTA(n) },
	}); err != nil {
		return err
	}
	podInf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	enqueueOwner := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		for _, ref := range p.OwnerReferences {
			if ref.Kind == "TaskAction" {
				f.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: ref.Name})
			}
		}
	}
	if _, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueueOwner, UpdateFunc: func(_, n any) { enqueueOwner(n) },
	}); err != nil {
		return err
	}

	srv := &http.Server{Addr: *metricsAddr, Handler: promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}),
		ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "floor: metrics:", err)
		}
	}()

	if *pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		psrv := &http.Server{Addr: *pprofAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := psrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "floor: pprof:", err)
			}
		}()
		defer psrv.Close()
	}

	cacheErr := make(chan error, 1)
	go func() { cacheErr <- c.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	synced := c.WaitForCacheSync(syncCtx)
	cancel()
	if !synced {
		return errors.New("caches did not sync")
	}
	fmt.Println("floor: ready")

	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, shutdown := f.queue.Get()
				if shutdown {
					return
				}
				if err := f.reconcile(ctx, key); err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "floor: %s: %v\n", key, err)
					}
					f.queue.AddRateLimited(key)
				} else {
					f.queue.Forget(key)
				}
				f.queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
	f.queue.ShutDown()
	wg.Wait()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return nil
}

type floor struct {
	cache  cache.Cache
	client client.Client
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	build  func(*flytev1.TaskAction, *task.Task, int32) (*corev1.Pod, error)
	// attempt (UID → int32) and finished remember this process's own
	// writes, so that a stale cache never makes it write twice.
	attempt, finished sync.Map
}

// reconcile creates attempt 1's pod; when the latest attempt's pod failed
// and the task has retries left, the next attempt's pod (nothing else: no
// status write between attempts); when the last pod ended, the terminal
// condition.
func (f *floor) reconcile(ctx context.Context, key types.NamespacedName) error {
	var ta flytev1.TaskAction
	if err := f.cache.Get(ctx, key, &ta); err != nil {
		return client.IgnoreNotFound(err)
	}
	if isTerminal(&ta) || !ta.DeletionTimestamp.IsZero() {
		return nil
	}
	if _, done := f.finished.Load(ta.UID); done {
		return nil
	}
	// The floor reads the template as any controller must to build the pod:
	// the typed form or Flyte's serialized one.
	t, err := task.FromTaskAction(&ta)
	if err != nil || t.Container == nil {
		fmt.Fprintf(os.Stderr, "floor: %s: not a container task: %v\n", key, err)
		return nil
	}
	var attempt int32
	if v, ok := f.attempt.Load(ta.UID); ok {
		attempt = v.(int32)
	}
	if attempt == 0 {
		return f.launch(ctx, &ta, t, 1)
	}
	var pod corev1.Pod
	err = f.cache.Get(ctx, types.NamespacedName{Namespace: ta.Namespace, Name: container.PodName(ta.Name, attempt)}, &pod)
	if apierrors.IsNotFound(err) {
		return nil // its watch event will bring us back
	}
	if err != nil {
		return err
	}
	var cond metav1.Condition
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		cond = metav1.Condition{Type: flytev1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: flytev1.ReasonCompleted, Message: "pod succeeded"}
	case corev1.PodFailed:
		if attempt < t.MaxAttempts() {
			return f.launch(ctx, &ta, t, attempt+1)
		}
		cond = metav1.Condition{Type: flytev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: flytev1.ReasonPermanentFailure, Message: "pod failed"}
	default:
		return nil
	}
	now := metav1.Now()
	cond.LastTransitionTime = now
	cond.ObservedGeneration = ta.Generation
	patched := ta.DeepCopy()
	patched.Status.Attempts = uint32(attempt)
	meta.SetStatusCondition(&patched.Status.Conditions, cond)
	if err := f.client.Status().Patch(ctx, patched, client.MergeFrom(&ta)); err != nil {
		return err
	}
	f.finished.Store(ta.UID, true)
	return nil
}

func (f *floor) launch(ctx context.Context, ta *flytev1.TaskAction, t *task.Task, attempt int32) error {
	pod, err := f.build(ta, t, attempt)
	if err != nil {
		return err
	}
	if err := f.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	f.attempt.Store(ta.UID, attempt)
	return nil
}

func isTerminal(ta *flytev1.TaskAction) bool {
	return meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionSucceeded) ||
		meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionFailed)
}

// The pods the floor can create (--pod).
const (
	floorPodMinimal  = "minimal"
	floorPodExecutor = "executor"
)

// floorPodBuilder builds the floor's pods: floorPod, or the executor's own
// (container.BuildPod with the default configuration's settings), which
// measures what the pod Flyte's runtime contract asks for costs the rig.
func floorPodBuilder(kind string) (func(*flytev1.TaskAction, *task.Task, int32) (*corev1.Pod, error), error) {
	switch kind {
	case floorPodMinimal:
		return func(ta *flytev1.TaskAction, t *task.Task, attempt int32) (*corev1.Pod, error) {
			return floorPod(ta, t, attempt), nil
		}, nil
	case floorPodExecutor:
		settings, err := setup.PluginSettings(config.Default())
		if err != nil {
			return nil, err
		}
		return func(ta *flytev1.TaskAction, t *task.Task, attempt int32) (*corev1.Pod, error) {
			return container.BuildPod(plugin.TaskContext{TaskAction: ta, Task: t, Attempt: attempt, Settings: settings})
		}, nil
	}
	return nil, fmt.Errorf("--pod: %q is neither %s nor %s", kind, floorPodMinimal, floorPodExecutor)
}

// floorPod is the smallest pod that runs the task's attempt: the executor's
// name, the managed, action and attempt labels, an owner reference, the
// template's and the TaskAction's annotations (which carry the bench's fail
// marker, as the executor copies them), and the executor's default resources.
func floorPod(ta *flytev1.TaskAction, t *task.Task, attempt int32) *corev1.Pod {
	tr := true
	c := corev1.Container{Name: container.DefaultPrimaryContainerName, Image: t.Container.Image,
		Command: t.Container.Command, Args: t.Container.Args, Resources: t.Container.Resources}
	if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		c.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	var annotations map[string]string
	for _, m := range []map[string]string{t.PodAnnotations, ta.Annotations} {
		for k, v := range m {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      container.PodName(ta.Name, attempt),
			Namespace: ta.Namespace,
			Labels: map[string]string{setup.ManagedLabel: "true", container.LabelAction: ta.Spec.ActionName,
				container.LabelAttempt: strconv.Itoa(int(attempt))},
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: flytev1.GroupVersion.String(), Kind: "TaskAction",
				Name: ta.Name, UID: ta.UID, Controller: &tr, BlockOwnerDeletion: &tr}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}, RestartPolicy: corev1.RestartPolicyNever},
	}
}
