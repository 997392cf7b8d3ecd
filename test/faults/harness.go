// Package faults holds the executor's fault suites: black-box runs of
// bin/executor on the kwok rig (internal/kwokrig) with a fault injected
// (crash, service outage, API-server restart, leader failover, delete storm),
// audited at the end by test/faults/audit; and the bad-input matrix, on plain
// envtest. `make test-faults` runs them all.
package faults

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flytev1 "github.com/taskaction/executor/api/v1"
	eventsv2 "github.com/taskaction/executor/gen/executor/events/v2"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/internal/kwokrig"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/test/faults/audit"
)

// Settings of the kwok suites, from the environment (make test-faults sets them).
type settings struct {
	Root, K8sBin, KwokBin, ExecutorBin string
	N, K, Storm                        int
	Seed                               int64
	Outage                             time.Duration
	Keep                               bool
}

func loadSettings(t *testing.T) settings {
	t.Helper()
	if os.Getenv("FAULTS_KWOK") != "1" {
		t.Skip("the kwok fault suites run with FAULTS_KWOK=1 (make test-faults)")
	}
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	s := settings{Root: root, N: 48, K: 3, Storm: 200, Seed: 1, Outage: 60 * time.Second}
	str := func(env, def string) string {
		if v := os.Getenv(env); v != "" {
			return v
		}
		return def
	}
	num := func(env string, def int) int {
		n, err := strconv.Atoi(str(env, strconv.Itoa(def)))
		if err != nil || n < 0 {
			t.Fatalf("%s: want a non-negative integer", env)
		}
		return n
	}
	s.K8sBin = str("FAULTS_K8S_BIN", str("KUBEBUILDER_ASSETS", filepath.Join(root, "bin", "k8s")))
	s.KwokBin = str("FAULTS_KWOK_BIN", filepath.Join(root, "bin", "kwok"))
	s.ExecutorBin = str("FAULTS_EXECUTOR_BIN", filepath.Join(root, "bin", "executor"))
	s.N, s.K, s.Storm = num("FAULTS_N", s.N), num("FAULTS_K", s.K), num("FAULTS_STORM", s.Storm)
	s.Seed = int64(num("FAULTS_SEED", int(s.Seed)))
	if v := os.Getenv("FAULTS_OUTAGE"); v != "" {
		if s.Outage, err = time.ParseDuration(v); err != nil {
			t.Fatalf("FAULTS_OUTAGE: %v", err)
		}
	}
	s.Keep = os.Getenv("FAULTS_KEEP") == "1"
	for _, b := range []string{filepath.Join(s.K8sBin, "kube-apiserver"), filepath.Join(s.K8sBin, "etcd"),
		filepath.Join(s.K8sBin, "kube-scheduler"), s.KwokBin, s.ExecutorBin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s missing: make envtest bench-tools build (or set FAULTS_K8S_BIN, FAULTS_KWOK_BIN, FAULTS_EXECUTOR_BIN)", b)
		}
	}
	return s
}

const (
	namespace    = "default"
	run          = "faults"
	leaseNS      = "executor-system"
	pollInterval = 500 * time.Millisecond
	// controller-runtime's leader-election defaults, which the executor keeps.
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// suite is one kwok rig with the events and cache services and the executor
// replicas under test.
type suite struct {
	t   *testing.T
	s   settings
	ctx context.Context
	dir string
	rig *kwokrig.Rig
	cl  client.Client

	eventsAddr, cacheAddr string
	eventsSvc, cacheSvc   *kwokrig.Proc
	witness               *EventsWitness

	users     []string
	executors map[string]*kwokrig.Proc // by user
	execArgs  map[string][]string
	start     time.Time

	mu       sync.Mutex
	terminal map[string]time.Time // first seen terminal, by name
}

func (x *suite) logf(format string, args ...any) {
	x.t.Helper()
	x.t.Logf("%s "+format, append([]any{time.Since(x.start).Round(100 * time.Millisecond)}, args...)...)
}

// newSuite starts the rig with replicas controller identities and the services.
func newSuite(t *testing.T, replicas int) *suite {
	s := loadSettings(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir, err := os.MkdirTemp("", "faults-"+strings.ToLower(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	x := &suite{t: t, s: s, ctx: ctx, dir: dir, executors: map[string]*kwokrig.Proc{}, execArgs: map[string][]string{},
		terminal: map[string]time.Time{}, start: time.Now()}
	t.Cleanup(func() {
		if s.Keep || t.Failed() {
			t.Logf("work directory kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	for i := range replicas {
		x.users = append(x.users, fmt.Sprintf("%s-%d", kwokrig.ControllerUser, i))
	}
	x.rig, err = kwokrig.Start(ctx, kwokrig.Options{Root: s.Root, K8sBin: s.K8sBin, KwokBin: s.KwokBin, Nodes: 4,
		RunDelay: time.Second, FinishDelay: 2 * time.Second, ControllerUsers: x.users, RoleNamespace: leaseNS,
		AuditPolicy: audit.Policy, Logf: func(f string, a ...any) { x.logf(f, a...) }}, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range x.executors {
			p.Stop(10 * time.Second)
		}
		if x.witness != nil {
			x.witness.Down()
		}
		x.eventsSvc.Stop(10 * time.Second)
		x.cacheSvc.Stop(10 * time.Second)
		x.rig.Stop()
	})
	cfg := rest.CopyConfig(x.rig.Admin)
	cfg.QPS, cfg.Burst, cfg.UserAgent = 500, 1000, "faults-harness"
	if x.cl, err = client.New(cfg, client.Options{Scheme: setup.Scheme()}); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = kwokrig.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	x.eventsAddr, x.cacheAddr = "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	x.startEventsService()
	x.startCacheService()
	if x.witness, err = StartEventsWitness("http://" + x.eventsAddr); err != nil {
		t.Fatal(err)
	}
	x.logf("rig up in %s", dir)
	return x
}

func (x *suite) startEventsService() {
	x.t.Helper()
	p, err := kwokrig.StartProc("events-service", filepath.Join(x.dir, "events-service.log"), x.s.ExecutorBin,
		"events-service", "--listen="+x.eventsAddr, "--data-dir="+filepath.Join(x.dir, "events"))
	if err == nil {
		err = kwokrig.WaitTCP(x.ctx, x.eventsAddr, time.Minute, p)
	}
	if err != nil {
		x.t.Fatal(err)
	}
	x.eventsSvc = p
}

func (x *suite) startCacheService() {
	x.t.Helper()
	p, err := kwokrig.StartProc("cache-service", filepath.Join(x.dir, "cache-service.log"), x.s.ExecutorBin,
		"cache-service", "--listen="+x.cacheAddr, "--data-dir="+filepath.Join(x.dir, "cache"))
	if err == nil {
		err = kwokrig.WaitTCP(x.ctx, x.cacheAddr, time.Minute, p)
	}
	if err != nil {
		x.t.Fatal(err)
	}
	x.cacheSvc = p
}

// startExecutor starts (or restarts) the replica of user; with waitWorkers it
// returns once its reconcilers run. extra flags are taken at its first start
// and kept for its restarts.
func (x *suite) startExecutor(user string, leaderElect, waitWorkers bool, extra ...string) {
	x.t.Helper()
	args, ok := x.execArgs[user]
	if !ok {
		port, err := kwokrig.FreePort()
		if err != nil {
			x.t.Fatal(err)
		}
		args = []string{"--kubeconfig=" + x.rig.Kubeconfigs[user],
			"--executor.metricsBindAddress=127.0.0.1:" + strconv.Itoa(port), "--executor.metricsSecure=false",
			"--executor.healthProbeBindAddress=0", "--executor.gc.interval=0",
			"--executor.leaderElect=" + strconv.FormatBool(leaderElect), "--executor.leaderElectionNamespace=" + leaseNS,
			"--executor.eventsServiceURL=" + x.witness.URL(), "--executor.cacheServiceURL=http://" + x.cacheAddr,
			"--executor.cluster=faults"}
		args = append(args, extra...)
		x.execArgs[user] = args
	}
	i := indexOf(x.users, user)
	logPath := filepath.Join(x.dir, fmt.Sprintf("executor-%d.log", i))
	offset := kwokrig.LogSize(logPath)
	p, err := kwokrig.StartProc(fmt.Sprintf("executor-%d", i), logPath, x.s.ExecutorBin, args...)
	if err != nil {
		x.t.Fatal(err)
	}
	x.executors[user] = p
	if waitWorkers {
		if err := kwokrig.WaitLogLine(x.ctx, p, `"msg":"Starting workers"`, offset, 2*time.Minute); err != nil {
			x.t.Fatal(err)
		}
	}
}

// kind is one part of the mix.
type kind struct {
	name    string
	fail    string // kwokrig.FailAnnotation value
	retries int32
	want    audit.Outcome
}

var mix = []kind{
	{"succeed", "", 0, audit.Outcome{Succeed: true, Attempts: 1}},
	{"fail", kwokrig.FailEveryAttempt, 0, audit.Outcome{Succeed: false, Attempts: 1}},
	{"fail-every-attempt", kwokrig.FailEveryAttempt, 2, audit.Outcome{Succeed: false, Attempts: 3}},
	{"fail-first-attempt", kwokrig.FailFirstAttempt, 1, audit.Outcome{Succeed: true, Attempts: 2}},
}

// taskAction is TaskAction i of the mix (or held running, for the storm).
func taskAction(prefix string, i int, hold bool) (*flytev1.TaskAction, kind) {
	k := mix[i%len(mix)]
	name := fmt.Sprintf("%s-%05d", prefix, i)
	annotations := map[string]string{}
	if k.fail != "" {
		annotations[kwokrig.FailAnnotation] = k.fail
	}
	if hold {
		annotations[kwokrig.HoldAnnotation] = "true"
	}
	ta := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: flytev1.TaskActionSpec{RunName: run, Project: "faults", Domain: "development", ActionName: name,
			TaskType: "container", InputURI: "s3://faults/" + name + "/inputs.pb", RunOutputBase: "s3://faults/" + run,
			Template: &flytev1.TypedTaskTemplate{
				ID:          flytev1.TaskID{Name: "faults." + k.name, Version: "v1"},
				Retries:     k.retries,
				Container:   &flytev1.Container{Image: "busybox:1.36", Command: []string{"true"}},
				PodTemplate: &flytev1.PodTemplate{Annotations: annotations},
			}},
	}
	if k.name == "succeed" {
		// The cache service is in the path of these: a miss, then a put.
		ta.Spec.CacheKey = "faults-" + name
	}
	return ta, k
}

// createMix creates TaskActions from..to-1 of the mix; it returns their expected outcomes.
func (x *suite) createMix(prefix string, from, to int, hold bool) map[string]audit.Outcome {
	x.t.Helper()
	want := map[string]audit.Outcome{}
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	sem := make(chan struct{}, 16)
	for i := from; i < to; i++ {
		ta, k := taskAction(prefix, i, hold)
		want[namespace+"/"+ta.Name] = k.want
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := x.cl.Create(x.ctx, ta); err != nil {
				errs <- fmt.Errorf("create %s: %w", ta.Name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		x.t.Fatal(err)
	}
	x.logf("%d TaskActions created", to-from)
	return want
}

// terminalCount lists the TaskActions and notes when each was first seen terminal.
func (x *suite) terminalCount() (terminal, total int, err error) {
	var list flytev1.TaskActionList
	cctx, cancel := context.WithTimeout(x.ctx, 10*time.Second)
	defer cancel()
	if err := x.cl.List(cctx, &list, client.InNamespace(namespace)); err != nil {
		return 0, 0, err
	}
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range list.Items {
		if list.Items[i].Status.IsTerminal() {
			terminal++
			if _, ok := x.terminal[list.Items[i].Name]; !ok {
				x.terminal[list.Items[i].Name] = now
			}
		}
	}
	return terminal, len(list.Items), nil
}

// waitTerminal waits until at least want TaskActions are terminal (API errors,
// as during an API-server restart, are waited out); false on timeout.
func (x *suite) waitTerminal(want int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	last := time.Now()
	for {
		n, total, err := x.terminalCount()
		if err == nil && n >= want {
			return true
		}
		if time.Since(last) > 15*time.Second {
			x.logf("%d of %d terminal (waiting for %d; list error: %v)", n, total, want, err)
			last = time.Now()
		}
		if time.Now().After(deadline) {
			x.logf("timed out: %d of %d terminal", n, total)
			return false
		}
		select {
		case <-x.ctx.Done():
			return false
		case <-time.After(pollInterval):
		}
	}
}

// lastTerminal is when the harness first saw the last TaskAction terminal.
func (x *suite) lastTerminal() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	var last time.Time
	for _, at := range x.terminal {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// world collects what the witnesses hold.
func (x *suite) world(expected map[string]audit.Outcome, deleted map[string]string) (audit.World, []audit.APIRequest) {
	x.t.Helper()
	w := audit.World{Expected: expected, Deleted: deleted}
	// A deletion and the finalizer's release are two steps: give the second a
	// grace period before counting finalizers as left.
	var tas flytev1.TaskActionList
	for deadline := time.Now().Add(finalizerGrace); ; {
		if err := x.cl.List(x.ctx, &tas, client.InNamespace(namespace)); err != nil {
			x.t.Fatal(err)
		}
		if holding := deletedHolding(tas.Items); holding == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval)
	}
	w.TaskActions = tas.Items
	var pods corev1.PodList
	if err := x.cl.List(x.ctx, &pods, client.MatchingLabels{setup.ManagedLabel: "true"}); err != nil {
		x.t.Fatal(err)
	}
	w.Pods = pods.Items
	reqs, err := audit.ReadAPILog(x.rig.AuditLog)
	if err != nil {
		x.t.Fatalf("audit log: %v", err)
	}
	w.PodCreates = audit.PodCreates(reqs)
	acked, undecoded := x.witness.Acked()
	if undecoded > 0 {
		x.t.Errorf("%d Record calls the witness could not decode: the acknowledged-events audits are blind to them", undecoded)
	}
	w.Acked = acked
	w.Stored = x.storedEvents()
	return w, reqs
}

// storedEvents reads the run's events from the events service with its own client.
func (x *suite) storedEvents() []*workflow.ActionEvent {
	x.t.Helper()
	c := events.NewQueryClient("http://"+x.eventsAddr, nil)
	var out []*workflow.ActionEvent
	token := ""
	for {
		resp, err := c.ListActionEvents(x.ctx, connect.NewRequest(&eventsv2.ListActionEventsRequest{Run: run, PageSize: 1000, PageToken: token}))
		if err != nil {
			x.t.Fatalf("list stored events: %v", err)
		}
		out = append(out, resp.Msg.GetEvents()...)
		if token = resp.Msg.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// check audits the world and fails the test on any non-zero count.
func (x *suite) check(name string, expected map[string]audit.Outcome, deleted map[string]string, extra func(*audit.Report, []audit.APIRequest)) {
	x.t.Helper()
	w, reqs := x.world(expected, deleted)
	r := audit.Check(w)
	if extra != nil {
		extra(r, reqs)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: N=%d TaskActions, %d pod creates, %d events acknowledged, %d stored\n", name, len(expected)+len(deleted), len(w.PodCreates), len(w.Acked), len(w.Stored))
	r.Print(&b)
	x.t.Log("audit of " + b.String())
	if f := r.Failures(); len(f) > 0 {
		x.t.Errorf("%s: %s", name, strings.Join(f, "; "))
	}
}

// finalizerGrace is how long a deleted TaskAction may keep the executor's
// finalizer before the audit counts it as left.
const finalizerGrace = 15 * time.Second

// deletedHolding counts the deleted TaskActions still held by the executor's finalizer.
func deletedHolding(tas []flytev1.TaskAction) int {
	n := 0
	for i := range tas {
		if tas[i].DeletionTimestamp != nil && controllerutil.ContainsFinalizer(&tas[i], flytev1.Finalizer) {
			n++
		}
	}
	return n
}

func indexOf(ss []string, s string) int {
	for i, v := range ss {
		if v == s {
			return i
		}
	}
	return -1
}

// seeded is the suite's random source.
func (x *suite) seeded() *rand.Rand { return rand.New(rand.NewSource(x.s.Seed)) }
