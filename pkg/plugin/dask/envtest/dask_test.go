package envtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/dask"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// TestSuccess: a dask task runs as a DaskJob the TaskAction controls (its
// job runner, scheduler and two workers from the task's container); the
// operator's JobCreated and ClusterCreated are INITIALIZING, Running is
// RUNNING (Executing, with the runner pod's and the dashboard's links) and
// Successful is SUCCEEDED (Completed); the finished job stays for its logs.
func TestSuccess(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, daskAction(t, ns, "sum", 0, 0))
	job := waitJob(t, ns, "sum", 1)
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "TaskAction" || ref.Name != "sum" {
		t.Fatalf("the job's controller is %+v", ref)
	}
	runner := job.Spec.Job.Spec.Containers[0]
	if runner.Name != dask.ContainerJobRunner || !strings.HasPrefix(strings.Join(runner.Args, " "), "a0 --inputs s3://b/"+ns+"/sum/inputs.pb --outputs-path s3://b/") {
		t.Errorf("runner container %s %v", runner.Name, runner.Args)
	}
	cl := job.Spec.Cluster.Spec
	if cl.Worker.Replicas != 2 || cl.Worker.Spec.Containers[0].Name != dask.ContainerWorker || cl.Scheduler.Spec.Containers[0].Name != dask.ContainerScheduler {
		t.Errorf("cluster %+v", cl)
	}
	if args := strings.Join(cl.Scheduler.Spec.Containers[0].Args, " "); args != "dask scheduler --dashboard-prefix /"+ns+"/sum-0" {
		t.Errorf("scheduler args %q: want the dashboard link's path", args)
	}
	if job.Labels[plugin.LabelManaged] != "true" || job.Labels["attempt"] != "1" {
		t.Errorf("labels %v: the operator copies them onto its pods", job.Labels)
	}

	setStatus(t, job, jobCreated)
	testenv.WaitReason(t, k8s, ns, "sum", flytev1.ConditionProgressing, flytev1.ReasonInitializing)
	setStatus(t, job, clusterCreated(job.Name))
	enginetest.Eventually(t, "the cluster's creation reported", func() bool {
		for _, e := range suite.Events(ns, "sum") {
			for _, ce := range e.ClusterEvents {
				if strings.Contains(ce.Message, "cluster created") {
					return true
				}
			}
		}
		return false
	})
	setStatus(t, job, running)
	testenv.WaitReason(t, k8s, ns, "sum", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, job, ended(daskv1.DaskJobSuccessful))
	got := testenv.WaitReason(t, k8s, ns, "sum", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	// Each step of the operator's that changes the message is reported
	// (an INITIALIZING per step seen), as Flyte reports a changed reason.
	evs := suite.Events(ns, "sum")
	if p := enginetest.Collapsed(evs); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events %s", enginetest.Phases(evs))
	}
	var run *events.Event
	for i := range evs {
		if evs[i].Phase == events.PhaseRunning {
			run = &evs[i]
		}
	}
	want := []string{"http://dashboard/#!/log/" + ns + "/sum-0-runner/pod?namespace=" + ns, "http://dask/" + ns + "/sum-0/status"}
	if run == nil || len(run.LogLinks) != 2 || run.LogLinks[0].GetUri() != want[0] || run.LogLinks[1].GetUri() != want[1] ||
		run.LogLinks[1].GetLinkType() != core.TaskLog_DASHBOARD || !run.LogLinks[1].GetReady() {
		t.Errorf("the RUNNING event's links: %v; want %v", run, want)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &daskv1.DaskJob{}); err != nil {
		t.Errorf("the finished job is gone: %v", err)
	}
}

// TestUserFailure: a job the operator marks Failed fails the task with
// Flyte's code and kind (DownstreamSystemError, USER) when no attempt is
// left; the job stays for its logs.
func TestUserFailure(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, daskAction(t, ns, "bad", 0, 0))
	job := waitJob(t, ns, "bad", 1)
	setStatus(t, job, clusterCreated(job.Name))
	setStatus(t, job, running)
	testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, job, ended(daskv1.DaskJobFailed))
	got := testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	es := got.Status.ErrorState
	if es == nil || es.Code != dask.CodeDaskJobFailed || es.Kind != flytev1.ErrorKindUser || es.Message != "Dask Job failed" {
		t.Errorf("errorState %+v", es)
	}
	// The job's first phases may be seen or not before it runs.
	if p := enginetest.Collapsed(suite.Events(ns, "bad")); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:FAILED" && p != "1:QUEUED 1:RUNNING 1:FAILED" {
		t.Errorf("events %s", p)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &daskv1.DaskJob{}); err != nil {
		t.Errorf("the failed job is gone: %v", err)
	}
}

// TestRetry: with a retry left, a failed job is deleted and the next
// attempt runs as a new job under the next name.
func TestRetry(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, daskAction(t, ns, "again", 1, 0))
	first := waitJob(t, ns, "again", 1)
	setStatus(t, first, ended(daskv1.DaskJobFailed))
	second := waitJob(t, ns, "again", 2)
	if second.Name != "again-1" || second.UID == first.UID {
		t.Fatalf("second attempt's job %s (uid %s)", second.Name, second.UID)
	}
	enginetest.WaitGone(t, k8s, first)
	if a := second.Labels["attempt"]; a != "2" {
		t.Errorf("second attempt's job labelled attempt %q", a)
	}
	if sel := second.Spec.Cluster.Spec.Scheduler.Service.Selector[dask.LabelClusterName]; sel != "again-1" {
		t.Errorf("the second attempt's scheduler Service selects cluster %q", sel)
	}
	setStatus(t, second, running)
	setStatus(t, second, ended(daskv1.DaskJobSuccessful))
	got := testenv.WaitReason(t, k8s, ns, "again", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	p := enginetest.Phases(suite.Events(ns, "again"))
	if !strings.HasPrefix(p, "1:QUEUED 2:QUEUED") || !strings.HasSuffix(p, "2:SUCCEEDED") {
		t.Errorf("events %s; want the failed attempt reported by the next one's QUEUED, then success", p)
	}
}

// TestAbort: deleting a running TaskAction deletes its job and reports
// ABORTED; the TaskAction is then let go.
func TestAbort(t *testing.T) {
	ns := suite.Namespace(t)
	ta := daskAction(t, ns, "stop", 0, 0)
	enginetest.Create(t, k8s, ta)
	job := waitJob(t, ns, "stop", 1)
	setStatus(t, job, running)
	testenv.WaitReason(t, k8s, ns, "stop", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitGone(t, k8s, job)
	enginetest.Eventually(t, "the TaskAction to be let go", func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
	})
	if p := enginetest.Collapsed(suite.Events(ns, "stop")); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:ABORTED" && p != "1:QUEUED 1:RUNNING 1:ABORTED" {
		t.Errorf("events %s", p)
	}
}

// TestTimeout: a job still running at the task's deadline is deleted and the
// task times out.
func TestTimeout(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, daskAction(t, ns, "slow", 0, 2*time.Second))
	job := waitJob(t, ns, "slow", 1)
	setStatus(t, job, running)
	got := testenv.WaitReason(t, k8s, ns, "slow", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeTimeout {
		t.Errorf("errorState %+v", es)
	}
	enginetest.WaitGone(t, k8s, job)
	if p := enginetest.Phases(suite.Events(ns, "slow")); !strings.HasSuffix(p, "1:TIMED_OUT") {
		t.Errorf("events %s", p)
	}
}

// TestGoldenJobsAdmitted: the DaskJob of every golden case is admitted by
// the operator's CRD, and stored as built but for spec.cluster.metadata,
// which the CRD does not have (so the plugin does not write it).
func TestGoldenJobsAdmitted(t *testing.T) {
	ns := suite.Namespace(t)
	files, err := filepath.Glob(filepath.Join("..", "testdata", "golden", "*.input.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("golden inputs: %v %v", files, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var in struct {
			DaskLogs   config.TaskLogConfig `json:"daskLogs"`
			TaskAction *flytev1.TaskAction  `json:"taskAction"`
		}
		if err := yaml.Unmarshal(raw, &in); err != nil {
			t.Fatal(err)
		}
		ta := in.TaskAction
		ta.Namespace = ns
		tk, err := task.FromTaskAction(ta)
		if err != nil {
			t.Fatal(err)
		}
		logs, err := tasklog.New(in.DaskLogs)
		if err != nil {
			t.Fatal(err)
		}
		tc := plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}}
		spec, err := dask.JobSpec(tk)
		if err != nil {
			t.Fatal(err)
		}
		prefix, err := dask.DashboardPrefix(logs, tc)
		if err != nil {
			t.Fatal(err)
		}
		job, err := dask.Build(tc, spec, prefix)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		stored := job.DeepCopy()
		if err := k8s.Create(context.Background(), stored, client.DryRunAll); err != nil {
			t.Errorf("%s: the API server refuses the job: %v", filepath.Base(f), err)
			continue
		}
		// Nothing is pruned (a field the CRD's schema does not know) or added.
		want, _ := json.Marshal(job.Spec)
		got, _ := json.Marshal(stored.Spec)
		if string(got) != string(want) {
			t.Errorf("%s: stored spec differs from the built one:\n built: %s\nstored: %s", filepath.Base(f), want, got)
		}
	}
}

// TestMissingCRD: in a cluster without the operator's CRDs a dask task
// fails at once, naming the kind and what to install.
func TestMissingCRD(t *testing.T) {
	suite.MissingCRD(t, func(ns string) *flytev1.TaskAction { return daskAction(t, ns, "nocrd", 2, 0) },
		"DaskJob of kubernetes.dask.org/v1", "daskjobs.kubernetes.dask.org")
}
