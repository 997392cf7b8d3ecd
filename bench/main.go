// Command bench measures the executor against a floor: a minimal controller
// that does only the API work nobody can avoid (create the pod of each
// attempt, one status write at the end). Each mode runs on a fresh control plane (etcd and
// kube-apiserver from bin/k8s), with kube-scheduler binding the pods to fake
// kwok nodes, and kwok Stages (internal/kwokrig/stages) walking them Pending → Running →
// Succeeded, or Failed for a chosen fraction.
//
//	go run ./bench --n 2000 --rate 0 --fail-fraction 0.1 --run-delay 1s --finish-delay 2s --mode both
//	go run ./bench --workload flyte|retries ...   (the TaskActions' shape)
//	go run ./bench --search                        (the highest steady rate each sustains)
//
// Results go to bench/results/<date>-<n>.{json,md,png} (--search: <date>-search.{json,md}). `bench floor` is the
// floor controller itself; the harness runs it as a subprocess.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type options struct {
	N            int
	Rate         float64
	FailFraction float64
	RunDelay     time.Duration
	FinishDelay  time.Duration
	Mode         string
	Nodes        int
	Timeout      time.Duration
	Settle       time.Duration
	Root         string
	Results      string
	ExecutorBin  string
	KwokBin      string
	K8sBin       string
	QPS          float64
	Burst        int
	Workers      int
	Creators     int
	Keep         bool
	Tag          string
	ExecutorArgs string

	Workload      string
	RetryFraction float64
	Unrelated     int
	FloorQPS      float64
	FloorBurst    int
	FloorPod      string
	FloorPprof    string
	FloorWebhook  bool
	// ProfileAPIServer: a CPU profile of kube-apiserver this long, taken
	// from the first create on (0: none).
	ProfileAPIServer time.Duration
	// ProfileHarness: a file for a CPU profile of this process (the
	// harness: creates, observer) over the whole bench.
	ProfileHarness string

	GC         bool
	Webhook    bool
	GCInterval time.Duration
	GCTTL      time.Duration
	GCTimeout  time.Duration

	// Rounds repeats floor and executor, alternating which goes first.
	Rounds int

	Search         bool
	SearchStart    float64
	SearchFactor   float64
	SearchStep     time.Duration
	SearchP99      time.Duration
	SearchMaxSteps int
	SearchRefine   int
}

func main() {
	// controller-runtime's packages log through this; the harness has its own output.
	ctrllog.SetLogger(logr.Discard())
	if len(os.Args) > 1 && os.Args[1] == "floor" {
		if err := runFloor(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&o.N, "n", 2000, "TaskActions to create")
	fs.Float64Var(&o.Rate, "rate", 0, "TaskActions created per second; 0: all at once")
	fs.Float64Var(&o.FailFraction, "fail-fraction", 0.1, "fraction of TaskActions whose pod fails (exit code 1, retries 0)")
	fs.DurationVar(&o.RunDelay, "run-delay", time.Second, "bound pod Pending → Running after this delay (kwok)")
	fs.DurationVar(&o.FinishDelay, "finish-delay", 2*time.Second, "pod Running → Succeeded/Failed after this delay (kwok)")
	fs.StringVar(&o.Mode, "mode", "both", "executor, floor or both (floor first, each on a fresh control plane)")
	fs.IntVar(&o.Nodes, "nodes", 10, "fake kwok nodes")
	fs.DurationVar(&o.Timeout, "timeout", 0, "bound on the wait for every TaskAction to end, per mode; 0: 2m + n×150ms")
	fs.DurationVar(&o.Settle, "settle", 3*time.Second, "wait after the last TaskAction ended before the final scrape, so trailing writes count")
	fs.StringVar(&o.Root, "root", "", "repository root (default: found upwards from the working directory)")
	fs.StringVar(&o.Results, "results", "", "results directory (default <root>/bench/results)")
	fs.StringVar(&o.ExecutorBin, "executor-bin", "", "executor binary (default <root>/bin/executor; `make build`)")
	fs.StringVar(&o.KwokBin, "kwok-bin", "", "kwok binary (default <root>/bin/kwok)")
	fs.StringVar(&o.K8sBin, "k8s-bin", "", "kube-apiserver, etcd and kube-scheduler (default $KUBEBUILDER_ASSETS, else <root>/bin/k8s)")
	fs.Float64Var(&o.QPS, "qps", 100, "client QPS of the controller under test (the executor's kubeAPIQPS default; the floor gets the same)")
	fs.IntVar(&o.Burst, "burst", 200, "client burst of the controller under test (the executor's kubeAPIBurst default)")
	fs.IntVar(&o.Workers, "floor-workers", 64, "floor reconcile workers (the executor's maxConcurrentReconciles default)")
	fs.IntVar(&o.Creators, "creators", 16, "harness goroutines creating TaskActions")
	fs.BoolVar(&o.Keep, "keep", false, "keep the per-mode work directories (logs, kubeconfigs)")
	fs.StringVar(&o.Tag, "tag", "", "suffix of the result file names (default: none)")
	fs.StringVar(&o.ExecutorArgs, "executor-args", "", "extra flags for the executor, space-separated")
	fs.StringVar(&o.Workload, "workload", workloadTyped, "typed (spec.template), flyte (spec.taskTemplate: Flyte's serialized container task, a file:// bucket as the executor's storage) or retries (typed; --retry-fraction retried once)")
	fs.Float64Var(&o.RetryFraction, "retry-fraction", 0.3, "with --workload retries: fraction of TaskActions with retries 1 whose first attempt's pod fails (exit 1) and second succeeds")
	fs.IntVar(&o.Unrelated, "unrelated", 0, "before each mode's controller starts, create this many TaskActions and as many plain unscheduled pods in the namespace "+unrelatedNamespace+", and scope both controllers to the bench namespace: the memory of ignoring them")
	fs.Float64Var(&o.FloorQPS, "floor-qps", 0, "client QPS of the floor (0: the same as --qps)")
	fs.IntVar(&o.FloorBurst, "floor-burst", 0, "client burst of the floor (0: the same as --burst)")
	fs.StringVar(&o.FloorPprof, "floor-pprof", "", "serve the floor's net/http/pprof at this address (e.g. 127.0.0.1:6066) for a profile to set beside the executor's (--executor-args \"--executor.pprofBindAddress=…\"); empty: none")
	fs.StringVar(&o.FloorPod, "floor-pod", floorPodMinimal, "the floor's pod: "+floorPodMinimal+" (the smallest that runs the task) or "+floorPodExecutor+" (the executor's own: Flyte's environment and labels, default resources)")
	fs.BoolVar(&o.FloorWebhook, "floor-webhook", false, "install the executor's admission webhooks in the floor's runs too, served by `executor webhook` alone: the floor's creates pay the executor's admission call (its TaskActions get the finalizer, which the floor never removes: use with --gc=false)")
	fs.DurationVar(&o.ProfileAPIServer, "profile-apiserver", 0, "take a CPU profile of kube-apiserver this long from each mode's first create, and with --gc from the start of its deletion phase, written beside the results as <base>-<mode>[-deletion]-apiserver.pprof (go tool pprof reads them); 0: none")
	fs.StringVar(&o.ProfileHarness, "profile-harness", "", "write a CPU profile of the harness itself (its creates and watches) over the whole bench to this file; empty: none")
	fs.BoolVar(&o.Webhook, "webhook", true, "run the executor with its admission webhooks installed, as config/default deploys it (the finalizer is added at creation)")
	fs.BoolVar(&o.GC, "gc", true, "after the hot path, delete every TaskAction and measure it: the executor's garbage collector (a second executor process with a short gc.interval/maxTTL), the harness for the floor")
	fs.DurationVar(&o.GCInterval, "gc-interval", time.Minute, "with --gc: the executor's gc.interval in the deletion phase (its minimum, 1m; the collector also sweeps once at start, which finds every TaskAction expired)")
	fs.DurationVar(&o.GCTTL, "gc-ttl", time.Second, "with --gc: the executor's gc.maxTTL in the deletion phase")
	fs.DurationVar(&o.GCTimeout, "gc-timeout", 0, "with --gc: bound on the wait for every TaskAction to be gone; 0: 90s + n×50ms")
	fs.IntVar(&o.Rounds, "rounds", 1, "with --mode both: run floor and executor this many times, alternating which goes first (floor, executor; executor, floor; …), each on a fresh control plane; the report gives each round's ratio and their median, and its full table is the median round's")
	fs.BoolVar(&o.Search, "search", false, "steady-rate search instead of one run of --n: the highest creation rate each controller sustains with p99 create → terminal within --search-p99")
	fs.Float64Var(&o.SearchStart, "search-start", 10, "with --search: the first rate (TaskActions/s)")
	fs.Float64Var(&o.SearchFactor, "search-factor", 2, "with --search: each next rate is the last × this")
	fs.DurationVar(&o.SearchStep, "search-step", time.Minute, "with --search: how long each rate is held")
	fs.DurationVar(&o.SearchP99, "search-p99", 30*time.Second, "with --search: the bound on a step's p99 create → terminal")
	fs.IntVar(&o.SearchMaxSteps, "search-max-steps", 5, "with --search: at most this many steps per controller")
	fs.IntVar(&o.SearchRefine, "search-refine", 0, "with --search: after the first failing step, this many steps between the highest passing and the lowest failing rate (their geometric mean)")
	_ = fs.Parse(os.Args[1:])
	if o.ProfileHarness != "" {
		f, err := os.Create(o.ProfileHarness)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: --profile-harness:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}

	if err := o.defaults(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// check refuses flags that are out of range or cannot go together.
func (o *options) check() error {
	if o.N <= 0 {
		return errors.New("--n must be positive")
	}
	if o.FailFraction < 0 || o.FailFraction > 1 {
		return errors.New("--fail-fraction must be in [0,1]")
	}
	if o.RetryFraction < 0 || o.RetryFraction > 1 {
		return errors.New("--retry-fraction must be in [0,1]")
	}
	if o.Unrelated < 0 {
		return errors.New("--unrelated must not be negative")
	}
	switch o.Workload {
	case workloadTyped, workloadFlyte, workloadRetries:
	default:
		return fmt.Errorf("--workload %q: want typed, flyte or retries", o.Workload)
	}
	if _, err := floorPodBuilder(o.FloorPod); err != nil {
		return err
	}
	if o.FloorWebhook && o.GC {
		return errors.New("--floor-webhook needs --gc=false: the webhook gives the floor's TaskActions a finalizer the floor never removes")
	}
	if o.GC && (o.GCInterval <= 0 || o.GCTTL <= 0) {
		return errors.New("--gc-interval and --gc-ttl must be positive")
	}
	if o.Search && (o.SearchStart <= 0 || o.SearchFactor <= 1 || o.SearchStep <= 0 || o.SearchP99 <= 0 || o.SearchMaxSteps <= 0 || o.SearchRefine < 0) {
		return errors.New("--search needs a positive --search-start, --search-step, --search-p99, --search-max-steps and a --search-factor above 1")
	}
	switch o.Mode {
	case "executor", "floor", "both":
	default:
		return fmt.Errorf("--mode %q: want executor, floor or both", o.Mode)
	}
	if o.Rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	if o.Rounds > 1 && (o.Mode != "both" || o.Search || o.ProfileAPIServer > 0) {
		return errors.New("--rounds above 1 needs --mode both, and neither --search nor --profile-apiserver (one profile per mode)")
	}
	return nil
}

// defaults checks the flags, then fills in what was left to a default and
// checks that the binaries are there.
func (o *options) defaults() error {
	if err := o.check(); err != nil {
		return err
	}
	if o.FloorQPS == 0 {
		o.FloorQPS = o.QPS
	}
	if o.FloorBurst == 0 {
		o.FloorBurst = o.Burst
	}
	if o.GCTimeout == 0 {
		o.GCTimeout = 90*time.Second + time.Duration(o.N)*50*time.Millisecond
	}
	if o.Root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		o.Root = r
	}
	if o.Results == "" {
		o.Results = filepath.Join(o.Root, "bench", "results")
	}
	if o.ExecutorBin == "" {
		o.ExecutorBin = filepath.Join(o.Root, "bin", "executor")
	}
	if o.KwokBin == "" {
		o.KwokBin = filepath.Join(o.Root, "bin", "kwok")
	}
	if o.K8sBin == "" {
		o.K8sBin = os.Getenv("KUBEBUILDER_ASSETS")
		if o.K8sBin == "" {
			o.K8sBin = filepath.Join(o.Root, "bin", "k8s")
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 2*time.Minute + time.Duration(o.N)*150*time.Millisecond
	}
	need := []string{o.KwokBin, filepath.Join(o.K8sBin, "kube-apiserver"), filepath.Join(o.K8sBin, "etcd"), filepath.Join(o.K8sBin, "kube-scheduler")}
	if o.Mode != "floor" {
		need = append(need, o.ExecutorBin)
	}
	for _, b := range need {
		if st, err := os.Stat(b); err != nil || st.IsDir() {
			return fmt.Errorf("%s not found: run `make bench-tools` (kwok, kube-scheduler) and `make build`", b)
		}
	}
	return nil
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "config", "crd", "bases")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from the executor's repository: no go.mod with config/crd/bases here or above")
		}
		dir = parent
	}
}

func run(ctx context.Context, o options) error {
	modes := []string{o.Mode}
	if o.Mode == "both" {
		modes = []string{"floor", "executor"}
	}
	rep := &Report{
		Started: time.Now().UTC(),
		Command: "go run ./bench " + strings.Join(os.Args[1:], " "),
		Params: Params{N: o.N, Rate: o.Rate, FailFraction: o.FailFraction, RunDelay: o.RunDelay.String(),
			FinishDelay: o.FinishDelay.String(), Nodes: o.Nodes, QPS: o.QPS, Burst: o.Burst, Creators: o.Creators,
			Workload: o.Workload, FloorQPS: o.FloorQPS, FloorBurst: o.FloorBurst, FloorPod: o.FloorPod, FloorWebhook: o.FloorWebhook, GC: o.GC && !o.Search, Webhook: o.Webhook,
			Unrelated: o.Unrelated},
		Machine: machineInfo(o.Root),
	}
	if o.Rounds > 1 {
		rep.Params.Rounds = o.Rounds
	}
	if o.Mode != "floor" {
		rep.Params.ExecutorBin = o.ExecutorBin
		rep.Params.ExecutorSHA = fileSHA(o.ExecutorBin)
	}
	if o.Search {
		rep.Params.N, rep.Params.Rate, rep.Params.GC = 0, 0, false
		rep.SearchParams = &SearchParams{StartRate: o.SearchStart, Factor: o.SearchFactor, Step: o.SearchStep.String(),
			P99Bound: o.SearchP99.String(), MaxSteps: o.SearchMaxSteps, Refine: o.SearchRefine}
		modes = nil
		for _, m := range []string{"floor", "executor"} {
			if o.Mode == m || o.Mode == "both" {
				q := waitQuiet(ctx)
				logf("=== search %s; waited %.0fs for a quiet machine (busy %.2f)", m, q.WaitSeconds, q.BusyShare)
				res, err := runSearch(ctx, o, m)
				res.Quiet = &q
				if err != nil {
					if ctx.Err() != nil {
						return err
					}
					res.Error = err.Error()
					logf("search %s failed: %v", m, err)
				}
				rep.Search = append(rep.Search, res)
				logf("=== search %s: sustains %.1f TaskActions/s", m, res.SustainedRate)
			}
		}
	}
	if o.Workload == workloadRetries {
		rep.Params.RetryFraction = o.RetryFraction
	}
	if o.GC && !o.Search {
		rep.Params.GCInterval, rep.Params.GCTTL = o.GCInterval.String(), o.GCTTL.String()
	}
	for round := 1; round <= o.Rounds; round++ {
		order := modes
		if round%2 == 0 && len(modes) == 2 {
			order = []string{modes[1], modes[0]} // drift within the hour hits both sides alike
		}
		if o.Rounds > 1 {
			logf("=== round %d of %d", round, o.Rounds)
		}
		for _, m := range order {
			q := waitQuiet(ctx)
			logf("=== mode %s: %d TaskActions (rate %v/s, fail fraction %.2f); waited %.0fs for a quiet machine (busy %.2f)", m, o.N, o.Rate, o.FailFraction, q.WaitSeconds, q.BusyShare)
			res, err := runMode(ctx, o, m)
			if res == nil {
				res = &ModeResult{Mode: m}
			}
			res.Quiet = &q
			if o.Rounds > 1 {
				res.Round = round
			}
			rep.Modes = append(rep.Modes, res)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				logf("mode %s failed: %v", m, err)
				res.Error = err.Error()
				continue
			}
			logf("=== mode %s: %s", m, res.Summary())
		}
	}
	rep.Rounds = roundResults(rep.Modes)
	for _, rr := range rep.Rounds {
		logf("=== round %d: floor %.1f, executor %.1f TaskActions/s (%.2f)", rr.Round, rr.FloorPerSecond, rr.ExecutorPerSecond, rr.Ratio)
	}
	rep.Finished = time.Now().UTC()
	paths, err := rep.Write(o.Results, o.Tag)
	if err != nil {
		return err
	}
	for _, p := range paths {
		logf("wrote %s", p)
	}
	md, _ := os.ReadFile(paths[1])
	fmt.Println(string(md))
	for _, m := range rep.Modes {
		if m.Error != "" {
			return fmt.Errorf("mode %s: %s", m.Mode, m.Error)
		}
	}
	for _, m := range rep.Search {
		if m.Error != "" {
			return fmt.Errorf("search %s: %s", m.Mode, m.Error)
		}
	}
	return nil
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}
