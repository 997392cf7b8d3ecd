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
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/clustered"
	"github.com/taskaction/executor/pkg/task"
)

// TestSuccess: a clustered task runs as a JobSet the TaskAction controls
// (one Indexed Job of two pods running the task's container with torchrun's
// environment); pods scheduling is INITIALIZING, workers active RUNNING
// (Executing, with a log link per rank), Completed SUCCEEDED (Completed);
// the finished JobSet stays for its logs.
func TestSuccess(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, trainAction(t, ns, "train", 0, 0, 0))
	js := waitJobSet(t, ns, "train", 1)
	if ref := metav1.GetControllerOf(js); ref == nil || ref.Kind != "TaskAction" || ref.Name != "train" {
		t.Fatalf("the JobSet's controller is %+v", ref)
	}
	job := js.Spec.ReplicatedJobs[0].Template.Spec
	c := job.Template.Spec.Containers[0]
	if *job.Completions != 2 || c.Name != js.Annotations[clustered.AnnotationPrimaryContainer] ||
		!strings.HasPrefix(strings.Join(c.Args, " "), "a0 --inputs s3://b/"+ns+"/train/inputs.pb --outputs-path s3://b/") {
		t.Errorf("job %+v, container %s %v", job, c.Name, c.Args)
	}
	if js.Labels[plugin.LabelManaged] != "true" || job.Template.Labels["attempt"] != "1" || job.Template.Spec.Subdomain != js.Name {
		t.Errorf("labels %v, %v; subdomain %s", js.Labels, job.Template.Labels, job.Template.Spec.Subdomain)
	}
	// The controller's first status: the Jobs created, no pod running yet.
	setStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: clustered.WorkersReplicatedJob}}
	})
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonInitializing)
	setStatus(t, js, workersActive)
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, js, terminal(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully"))
	got := testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	evs := suite.Events(ns, "train")
	if p := enginetest.Collapsed(evs); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events %s", p)
	}
	var running *events.Event
	for i := range evs {
		if evs[i].Phase == events.PhaseRunning {
			running = &evs[i]
		}
	}
	if running == nil || len(running.LogLinks) != 2 || running.LogLinks[1].GetName() != "Kubernetes Logsrank-1" ||
		running.LogLinks[1].GetUri() != "http://dashboard/#!/log/"+ns+"/train-0-workers-0-1/pod?namespace="+ns {
		t.Errorf("the RUNNING event's links: %v", running)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(js), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Errorf("the finished JobSet is gone: %v", err)
	}
}

// TestUserFailure: a JobSet that failed (its restarts spent) fails the task
// with the condition's reason as the code, USER, when no attempt is left;
// the JobSet stays for its logs.
func TestUserFailure(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, trainAction(t, ns, "bad", 0, 0, 2))
	js := waitJobSet(t, ns, "bad", 1)
	if fp := js.Spec.FailurePolicy; fp == nil || fp.MaxRestarts != 2 {
		t.Errorf("failure policy %+v", fp)
	}
	setStatus(t, js, workersActive)
	testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) { s.Restarts = 2 })
	setStatus(t, js, terminal(jobsetv1alpha2.JobSetFailed, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"))
	got := testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	es := got.Status.ErrorState
	if es == nil || es.Code != "ReachedMaxRestarts" || es.Kind != flytev1.ErrorKindUser || !strings.Contains(es.Message, "max number of restarts") {
		t.Errorf("errorState %+v", es)
	}
	// The first look may find the pods scheduling or already running.
	if p := enginetest.Collapsed(suite.Events(ns, "bad")); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:FAILED" && p != "1:QUEUED 1:RUNNING 1:FAILED" {
		t.Errorf("events %s", p)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(js), &jobsetv1alpha2.JobSet{}); err != nil {
		t.Errorf("the failed JobSet is gone: %v", err)
	}
}

// TestRetry: with a retry left, a failed JobSet is deleted and the next
// attempt runs as a new JobSet under the next name.
func TestRetry(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, trainAction(t, ns, "again", 1, 0, 0))
	first := waitJobSet(t, ns, "again", 1)
	setStatus(t, first, terminal(jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed due to one or more job failures"))
	second := waitJobSet(t, ns, "again", 2)
	if second.Name != "again-1" || second.UID == first.UID {
		t.Fatalf("second attempt's JobSet %s (uid %s)", second.Name, second.UID)
	}
	enginetest.WaitGone(t, k8s, first)
	pod := second.Spec.ReplicatedJobs[0].Template.Spec.Template
	if pod.Labels["attempt"] != "2" || pod.Spec.Subdomain != "again-1" {
		t.Errorf("second attempt's pods: attempt %q, subdomain %q", pod.Labels["attempt"], pod.Spec.Subdomain)
	}
	setStatus(t, second, workersActive)
	setStatus(t, second, terminal(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", ""))
	got := testenv.WaitReason(t, k8s, ns, "again", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	p := enginetest.Collapsed(suite.Events(ns, "again"))
	if !strings.HasPrefix(p, "1:QUEUED") || !strings.Contains(p, "2:QUEUED") || !strings.HasSuffix(p, "2:SUCCEEDED") || strings.Contains(p, "1:FAILED") {
		t.Errorf("events %s; want the failed attempt reported by the next one's QUEUED, then success", p)
	}
}

// TestAbort: deleting a running TaskAction deletes its JobSet and reports
// ABORTED; the TaskAction is then let go.
func TestAbort(t *testing.T) {
	ns := suite.Namespace(t)
	ta := trainAction(t, ns, "stop", 0, 0, 0)
	enginetest.Create(t, k8s, ta)
	js := waitJobSet(t, ns, "stop", 1)
	setStatus(t, js, workersActive)
	testenv.WaitReason(t, k8s, ns, "stop", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitGone(t, k8s, js)
	enginetest.Eventually(t, "the TaskAction to be let go", func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
	})
	if p := enginetest.Collapsed(suite.Events(ns, "stop")); !strings.HasSuffix(p, "1:RUNNING 1:ABORTED") {
		t.Errorf("events %s", p)
	}
}

// TestTimeout: a JobSet still running at the task's deadline is deleted and
// the task times out.
func TestTimeout(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, trainAction(t, ns, "slow", 0, 2*time.Second, 0))
	js := waitJobSet(t, ns, "slow", 1)
	setStatus(t, js, workersActive)
	got := testenv.WaitReason(t, k8s, ns, "slow", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeTimeout {
		t.Errorf("errorState %+v", es)
	}
	enginetest.WaitGone(t, k8s, js)
	if p := enginetest.Collapsed(suite.Events(ns, "slow")); !strings.HasSuffix(p, "1:TIMED_OUT") {
		t.Errorf("events %s", p)
	}
}

// TestGoldenJobSetsAdmitted: the JobSet of every golden case is admitted by
// JobSet's CRD and stored as built (nothing pruned).
func TestGoldenJobSetsAdmitted(t *testing.T) {
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
			TaskAction *flytev1.TaskAction `json:"taskAction"`
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
		spec, err := clustered.TaskSpec(tk)
		if err != nil {
			t.Fatal(err)
		}
		js, err := clustered.Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}}, spec)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		stored := js.DeepCopy()
		if err := k8s.Create(context.Background(), stored, client.DryRunAll); err != nil {
			t.Errorf("%s: the API server refuses the JobSet: %v", filepath.Base(f), err)
			continue
		}
		// The CRD's defaults aside (the replicated job's group, the failure
		// policy's restart strategy).
		for i := range js.Spec.ReplicatedJobs {
			js.Spec.ReplicatedJobs[i].GroupName = "default"
		}
		if fp := js.Spec.FailurePolicy; fp != nil {
			fp.RestartStrategy = jobsetv1alpha2.Recreate
		}
		want, _ := json.Marshal(js.Spec)
		got, _ := json.Marshal(stored.Spec)
		if string(got) != string(want) {
			t.Errorf("%s: stored spec differs from the built one:\n built: %s\nstored: %s", filepath.Base(f), want, got)
		}
	}
}

// TestMissingCRD: in a cluster without JobSet's CRD a clustered task fails
// at once, naming the kind and what to install.
func TestMissingCRD(t *testing.T) {
	suite.MissingCRD(t, func(ns string) *flytev1.TaskAction { return trainAction(t, ns, "nocrd", 2, 0, 0) },
		"JobSet of jobset.x-k8s.io/v1alpha2", "jobsets.jobset.x-k8s.io")
}
