package envtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/kubeflow"
	"github.com/taskaction/executor/pkg/task"
)

// TestSuccess: a pytorch task runs as a PyTorchJob the TaskAction controls
// (a master and two workers running the task's container as "pytorch");
// the operator's Created, Running and Succeeded conditions are QUEUED,
// RUNNING (Executing, with a log link per replica) and SUCCEEDED (Completed),
// and the finished job stays for its logs.
func TestSuccess(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, pytorchAction(t, ns, "train", 0, 0))
	job := waitJob(t, ns, "train", 1)
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "TaskAction" || ref.Name != "train" {
		t.Fatalf("the job's controller is %+v", ref)
	}
	master, worker := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster], job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]
	if master == nil || worker == nil || *master.Replicas != 1 || *worker.Replicas != 2 {
		t.Fatalf("replica specs %+v", job.Spec.PyTorchReplicaSpecs)
	}
	c := worker.Template.Spec.Containers[0]
	if c.Name != kubeflowv1.PyTorchJobDefaultContainerName || !strings.HasPrefix(strings.Join(c.Args, " "), "a0 --inputs s3://b/"+ns+"/train/inputs.pb --outputs-path s3://b/") {
		t.Errorf("worker container %s %v", c.Name, c.Args)
	}
	if job.Labels[plugin.LabelManaged] != "true" || worker.Template.Labels["attempt"] != "1" {
		t.Errorf("labels %v, %v", job.Labels, worker.Template.Labels)
	}

	setStatus(t, job, condition(kubeflowv1.JobCreated, "PyTorchJobCreated", "PyTorchJob train-0 is created."))
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonQueued)
	setStatus(t, job, condition(kubeflowv1.JobRunning, "PyTorchJobRunning", "PyTorchJob train-0 is running."))
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, job, condition(kubeflowv1.JobSucceeded, "PyTorchJobSucceeded", "PyTorchJob train-0 is successfully completed."))
	got := testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	evs := suite.Events(ns, "train")
	if p := enginetest.Collapsed(evs); p != "1:QUEUED 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events %s", p)
	}
	var running *events.Event
	for i := range evs {
		if evs[i].Phase == events.PhaseRunning {
			running = &evs[i]
		}
	}
	if running == nil || len(running.LogLinks) != 3 || !strings.HasSuffix(running.LogLinks[0].GetName(), "(master-0)") ||
		running.LogLinks[2].GetUri() != "http://dashboard/#!/log/"+ns+"/train-0-worker-1/pod?namespace="+ns {
		t.Errorf("the RUNNING event's links: %v", running)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &kubeflowv1.PyTorchJob{}); err != nil {
		t.Errorf("the finished job is gone: %v", err)
	}
}

// TestUserFailure: a job the operator marks Failed fails the task with
// Flyte's code and kind (DownstreamSystemError, USER) when no attempt is
// left; the job stays for its logs.
func TestUserFailure(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, pytorchAction(t, ns, "bad", 0, 0))
	job := waitJob(t, ns, "bad", 1)
	setStatus(t, job, condition(kubeflowv1.JobRunning, "PyTorchJobRunning", ""))
	testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, job, condition(kubeflowv1.JobFailed, "PyTorchJobFailed", "PyTorchJob bad-0 is failed because 1 Worker replica(s) failed."))
	got := testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	es := got.Status.ErrorState
	if es == nil || es.Code != kubeflow.CodeJobFailed || es.Kind != flytev1.ErrorKindUser || !strings.Contains(es.Message, "1 Worker replica(s) failed") {
		t.Errorf("errorState %+v", es)
	}
	if p := enginetest.Collapsed(suite.Events(ns, "bad")); p != "1:QUEUED 1:RUNNING 1:FAILED" {
		t.Errorf("events %s", p)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &kubeflowv1.PyTorchJob{}); err != nil {
		t.Errorf("the failed job is gone: %v", err)
	}
}

// TestRetry: with a retry left, a failed job is deleted and the next
// attempt runs as a new job under the next name.
func TestRetry(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, pytorchAction(t, ns, "again", 1, 0))
	first := waitJob(t, ns, "again", 1)
	setStatus(t, first, condition(kubeflowv1.JobFailed, "PyTorchJobFailed", "worker 0 exited with code 1"))
	second := waitJob(t, ns, "again", 2)
	if second.Name != "again-1" || second.UID == first.UID {
		t.Fatalf("second attempt's job %s (uid %s)", second.Name, second.UID)
	}
	enginetest.WaitGone(t, k8s, first)
	if env := second.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template.Labels["attempt"]; env != "2" {
		t.Errorf("second attempt's pods labelled attempt %q", env)
	}
	setStatus(t, second, condition(kubeflowv1.JobSucceeded, "PyTorchJobSucceeded", ""))
	got := testenv.WaitReason(t, k8s, ns, "again", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	p := enginetest.Collapsed(suite.Events(ns, "again"))
	if !strings.HasPrefix(p, "1:QUEUED 2:QUEUED") || !strings.HasSuffix(p, "2:SUCCEEDED") {
		t.Errorf("events %s; want the failed attempt reported by the next one's QUEUED, then success", p)
	}
}

// TestAbort: deleting a running TaskAction deletes its job and reports
// ABORTED; the TaskAction is then let go.
func TestAbort(t *testing.T) {
	ns := suite.Namespace(t)
	ta := pytorchAction(t, ns, "stop", 0, 0)
	enginetest.Create(t, k8s, ta)
	job := waitJob(t, ns, "stop", 1)
	setStatus(t, job, condition(kubeflowv1.JobRunning, "PyTorchJobRunning", ""))
	testenv.WaitReason(t, k8s, ns, "stop", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitGone(t, k8s, job)
	enginetest.Eventually(t, "the TaskAction to be let go", func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
	})
	if p := enginetest.Collapsed(suite.Events(ns, "stop")); p != "1:QUEUED 1:RUNNING 1:ABORTED" {
		t.Errorf("events %s", p)
	}
}

// TestTimeout: a job still running at the task's deadline is deleted and the
// task times out.
func TestTimeout(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, pytorchAction(t, ns, "slow", 0, 2*time.Second))
	job := waitJob(t, ns, "slow", 1)
	setStatus(t, job, condition(kubeflowv1.JobRunning, "PyTorchJobRunning", ""))
	got := testenv.WaitReason(t, k8s, ns, "slow", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeTimeout {
		t.Errorf("errorState %+v", es)
	}
	enginetest.WaitGone(t, k8s, job)
	if p := enginetest.Collapsed(suite.Events(ns, "slow")); !strings.HasSuffix(p, "1:TIMED_OUT") {
		t.Errorf("events %s", p)
	}
}

// TestJobsAdmitted: every golden job (PyTorch, TensorFlow, MPI, both task
// type versions) is admitted by the operator's CRDs (a server-side dry run).
func TestJobsAdmitted(t *testing.T) {
	ns := suite.Namespace(t)
	dir := filepath.Join("..", "testdata", "golden")
	files, err := filepath.Glob(filepath.Join(dir, "*.template.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	taYAML, err := os.ReadFile(filepath.Join(dir, "taskaction.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &core.TaskTemplate{}
		if err := protojson.Unmarshal(raw, tmpl); err != nil {
			t.Fatal(err)
		}
		ta := &flytev1.TaskAction{}
		if err := yaml.Unmarshal(taYAML, ta); err != nil {
			t.Fatal(err)
		}
		ta.Namespace = ns
		if ta.Spec.TaskTemplate, err = proto.Marshal(tmpl); err != nil {
			t.Fatal(err)
		}
		ta.Spec.TaskType = tmpl.GetType()
		tk, err := task.FromTaskAction(ta)
		if err != nil {
			t.Fatal(err)
		}
		p, err := kubeflow.NewPlugin(tmpl.GetType(), kubeflow.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		obj, err := p.Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
			t.Errorf("%s: the API server refuses the job: %v", filepath.Base(f), err)
		}
	}
}

// TestMissingCRD: in a cluster without the operator's CRDs a pytorch task
// fails at once, naming the kind and what to install.
func TestMissingCRD(t *testing.T) {
	suite.MissingCRD(t, func(ns string) *flytev1.TaskAction { return pytorchAction(t, ns, "nocrd", 2, 0) },
		"PyTorchJob of kubeflow.org/v1", "pytorchjobs.kubeflow.org")
}
