package envtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/plugin/ray"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/task"
)

// TestSuccess: a ray task runs as a RayJob the TaskAction controls (a head
// and two workers running the task's container as ray-head and ray-worker,
// the task's arguments as the job's entrypoint); KubeRay's statuses are
// QUEUED (none yet), INITIALIZING (the cluster being created), RUNNING
// (Executing, with the head pod's and the Ray dashboard's links) and
// SUCCEEDED (Completed); the finished RayJob stays for its logs.
func TestSuccess(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, rayAction(t, ns, "train", 0, 0))
	job := waitJob(t, ns, "train", 1)
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "TaskAction" || ref.Name != "train" {
		t.Fatalf("the RayJob's controller is %+v", ref)
	}
	if job.Name != "train-0" || job.Labels[plugin.LabelManaged] != "true" {
		t.Errorf("RayJob %s labels %v", job.Name, job.Labels)
	}
	cs := job.Spec.RayClusterSpec
	if cs == nil || cs.HeadGroupSpec.Template.Spec.Containers[0].Name != ray.HeadContainerName || len(cs.WorkerGroupSpecs) != 1 ||
		*cs.WorkerGroupSpecs[0].Replicas != 2 || cs.WorkerGroupSpecs[0].Template.Spec.Containers[0].Name != ray.WorkerContainerName {
		t.Fatalf("cluster spec %+v", cs)
	}
	if !strings.HasPrefix(job.Spec.Entrypoint, "a0 --inputs s3://b/"+ns+"/train/inputs.pb --outputs-path s3://b/") {
		t.Errorf("entrypoint %q", job.Spec.Entrypoint)
	}
	if l := cs.WorkerGroupSpecs[0].Template.Labels; l[plugin.LabelManaged] != "true" || l["attempt"] != "1" {
		t.Errorf("worker pod labels %v: KubeRay's pods must be the executor's", l)
	}
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonQueued)

	setStatus(t, job, initializing(job))
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonInitializing)
	setStatus(t, job, running)
	testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, job, ended(rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded, "", "Job finished successfully."))
	got := testenv.WaitReason(t, k8s, ns, "train", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	evs := suite.Events(ns, "train")
	if p := enginetest.Collapsed(evs); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events %s", p)
	}
	var runningEvent *events.Event
	for i := range evs {
		if evs[i].Phase == events.PhaseRunning {
			runningEvent = &evs[i]
		}
	}
	head := job.Name + "-x7k2p-head"
	wantLinks := []string{"http://dashboard/#!/log/" + ns + "/" + head + "/pod?namespace=" + ns,
		"http://ray/" + ns + "/" + job.Name + "-x7k2p/#/jobs/" + job.Name + "-q9w4z"}
	if runningEvent == nil || len(runningEvent.LogLinks) != 2 || runningEvent.LogLinks[0].GetUri() != wantLinks[0] ||
		runningEvent.LogLinks[1].GetUri() != wantLinks[1] || runningEvent.LogLinks[1].GetLinkType() != core.TaskLog_DASHBOARD {
		t.Errorf("the RUNNING event's links: %v; want %v", runningEvent, wantLinks)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &rayv1.RayJob{}); err != nil {
		t.Errorf("the finished RayJob is gone: %v", err)
	}
}

// TestUserFailure: a RayJob KubeRay marks Failed (the job's entrypoint
// failed) fails the task with Flyte's code and kind (TaskFailedWithError,
// USER) when the runtime left no error.pb; the RayJob stays for its logs.
func TestUserFailure(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, rayAction(t, ns, "bad", 1, 0))
	job := waitJob(t, ns, "bad", 1)
	setStatus(t, job, initializing(job))
	setStatus(t, job, running)
	testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, job, ended(rayv1.JobDeploymentStatusFailed, rayv1.JobStatusFailed, rayv1.AppFailed, "Job entrypoint command failed with exit code 1"))
	got := testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	es := got.Status.ErrorState
	if es == nil || es.Code != ray.CodeTaskFailedWithError || es.Kind != flytev1.ErrorKindUser || !strings.Contains(es.Message, "exit code 1") {
		t.Errorf("errorState %+v", es)
	}
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d: a failed Ray job is not retried without a recoverable error, as in Flyte", got.Status.Attempts)
	}
	if p := enginetest.Collapsed(suite.Events(ns, "bad")); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:FAILED" {
		t.Errorf("events %s", p)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &rayv1.RayJob{}); err != nil {
		t.Errorf("the failed RayJob is gone: %v", err)
	}
}

// TestRetry: a failed Ray job whose runtime reported a recoverable error
// (error.pb) is retried: its RayJob is deleted and the next attempt runs as
// a new RayJob under the next name.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	ta := rayAction(t, ns, "again", 1, 0)
	enginetest.Create(t, k8s, ta)
	first := waitJob(t, ns, "again", 1)
	setStatus(t, first, initializing(first))
	setStatus(t, first, running)
	testenv.WaitReason(t, k8s, ns, "again", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	doc := &core.ErrorDocument{Error: &core.ContainerError{Code: "ConnectionError", Message: "the object store went away",
		Kind: core.ContainerError_RECOVERABLE, Origin: core.ExecutionError_USER}}
	cur := testenv.GetTaskAction(t, k8s, ns, "again")
	if err := suite.Store(t).WriteProtobuf(ctx, task.OutputPrefix(cur, 1)+"/"+layout.ErrorFile, doc); err != nil {
		t.Fatal(err)
	}
	setStatus(t, first, ended(rayv1.JobDeploymentStatusFailed, rayv1.JobStatusFailed, rayv1.AppFailed, "Job entrypoint command failed with exit code 1"))

	second := waitJob(t, ns, "again", 2)
	if second.Name != "again-1" || second.UID == first.UID {
		t.Fatalf("second attempt's RayJob %s (uid %s)", second.Name, second.UID)
	}
	enginetest.WaitGone(t, k8s, first)
	if l := second.Spec.RayClusterSpec.HeadGroupSpec.Template.Labels["attempt"]; l != "2" {
		t.Errorf("second attempt's pods labelled attempt %q", l)
	}
	setStatus(t, second, initializing(second))
	setStatus(t, second, running)
	setStatus(t, second, ended(rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded, "", ""))
	got := testenv.WaitReason(t, k8s, ns, "again", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	evs := suite.Events(ns, "again")
	p := enginetest.Collapsed(evs)
	if !strings.Contains(p, "1:RUNNING 2:QUEUED") || !strings.HasSuffix(p, "2:SUCCEEDED") || strings.Contains(p, "1:FAILED") {
		t.Errorf("events %s; want the failed attempt reported by the next one's QUEUED, then success", p)
	}
	for _, e := range evs {
		if e.Attempt == 2 && e.Phase == events.PhaseQueued {
			if e.Error == nil || e.Error.Code != "ConnectionError" || e.Error.Kind != "USER" {
				t.Errorf("the second attempt's first QUEUED carries %+v, want the runtime's error", e.Error)
			}
			break
		}
	}
}

// TestSystemRetry: KubeRay giving up on the job's end (the transition grace
// period) is a system failure: the same attempt runs again, as a new RayJob
// of the same name once the old one is gone (KubeRay's finalizer holds it
// while the Ray job stops).
func TestSystemRetry(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, rayAction(t, ns, "lost", 0, 0))
	first := waitJob(t, ns, "lost", 1)
	holdFinalizer(t, first)
	setStatus(t, first, initializing(first))
	setStatus(t, first, running)
	testenv.WaitReason(t, k8s, ns, "lost", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, first, ended(rayv1.JobDeploymentStatusFailed, rayv1.JobStatusFailed, rayv1.JobDeploymentStatusTransitionGracePeriodExceeded, ""))
	// The name stays taken while KubeRay stops the job.
	releaseFinalizer(t, first)
	var again *rayv1.RayJob
	enginetest.Eventually(t, "a new RayJob for the same attempt", func() bool {
		j := &rayv1.RayJob{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(first), j); err != nil || j.UID == first.UID {
			return false
		}
		again = j
		return true
	})
	got := testenv.GetTaskAction(t, k8s, ns, "lost")
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d: a system failure runs the same attempt again", got.Status.Attempts)
	}
	if got.Status.SystemFailures != 1 {
		t.Errorf("system failures %d, want 1", got.Status.SystemFailures)
	}
	setStatus(t, again, ended(rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded, "", ""))
	testenv.WaitReason(t, k8s, ns, "lost", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if p := enginetest.Collapsed(suite.Events(ns, "lost")); strings.Contains(p, "FAILED") || strings.Contains(p, "2:") || !strings.HasSuffix(p, "1:SUCCEEDED") {
		t.Errorf("events %s: want one attempt, run again after the system failure, then success", p)
	}
}

// TestAbort: deleting a running TaskAction deletes its RayJob (which
// KubeRay's finalizer holds while the Ray job stops) and reports ABORTED;
// the TaskAction is then let go.
func TestAbort(t *testing.T) {
	ns := suite.Namespace(t)
	ta := rayAction(t, ns, "stop", 0, 0)
	enginetest.Create(t, k8s, ta)
	job := waitJob(t, ns, "stop", 1)
	holdFinalizer(t, job)
	setStatus(t, job, initializing(job))
	setStatus(t, job, running)
	testenv.WaitReason(t, k8s, ns, "stop", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	releaseFinalizer(t, job)
	enginetest.WaitGone(t, k8s, job)
	enginetest.Eventually(t, "the TaskAction to be let go", func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
	})
	if p := enginetest.Collapsed(suite.Events(ns, "stop")); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:ABORTED" {
		t.Errorf("events %s", p)
	}
}

// TestTimeout: a RayJob still going at the task's deadline is deleted and
// the task times out.
func TestTimeout(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, rayAction(t, ns, "slow", 0, 2*time.Second))
	job := waitJob(t, ns, "slow", 1)
	setStatus(t, job, initializing(job))
	setStatus(t, job, running)
	got := testenv.WaitReason(t, k8s, ns, "slow", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeTimeout {
		t.Errorf("errorState %+v", es)
	}
	enginetest.WaitGone(t, k8s, job)
	if p := enginetest.Collapsed(suite.Events(ns, "slow")); !strings.HasSuffix(p, "1:TIMED_OUT") {
		t.Errorf("events %s", p)
	}
}

// TestRayJobsAdmitted: RayJobs of every shape the plugin builds (worker
// groups with their own pod specs and accelerators, autoscaling, each
// submission mode, a logs sidecar, a pod-spec task) are admitted by
// KubeRay's CRD, its schema and CEL rules (a server-side dry run).
func TestRayJobsAdmitted(t *testing.T) {
	ns := suite.Namespace(t)
	full := &plugins.RayJob{
		RayCluster: &plugins.RayCluster{
			HeadGroupSpec: &plugins.HeadGroupSpec{K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, map[string]any{
				"containers": []any{map[string]any{"name": "ray-head", "resources": map[string]any{"requests": map[string]any{"cpu": "2"}}}}})}},
			WorkerGroupSpec: []*plugins.WorkerGroupSpec{
				{GroupName: "cpu", Replicas: 2, MinReplicas: 1, MaxReplicas: 5},
				{GroupName: "gpu", Replicas: 1, ExtendedResources: &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "A100"}},
					K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, map[string]any{"containers": []any{map[string]any{"name": "ray-worker",
						"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}}}})}},
			},
			EnableAutoscaling: true,
			AutoscalerOptions: &plugins.AutoscalerOptions{UpscalingMode: plugins.AutoscalerOptions_UPSCALING_MODE_DEFAULT, IdleTimeoutSeconds: 60,
				Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: "500m"}}}},
		},
		RuntimeEnvYaml: "pip:\n- numpy\n", ShutdownAfterJobFinishes: true, TtlSecondsAfterFinished: 60,
	}
	withCustom := func(name string, job *plugins.RayJob, edit func(*core.TaskTemplate)) *flytev1.TaskAction {
		ta := rayAction(t, ns, name, 0, 0)
		tmpl := &core.TaskTemplate{}
		if err := proto.Unmarshal(ta.Spec.TaskTemplate, tmpl); err != nil {
			t.Fatal(err)
		}
		tmpl.Custom = plugintest.Custom(t, job)
		if edit != nil {
			edit(tmpl)
		}
		b, err := proto.Marshal(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		ta.Spec.TaskTemplate = b
		return ta
	}
	podTarget := func(tm *core.TaskTemplate) {
		tm.Config = map[string]string{"primary_container_name": "main"}
		tm.Target = &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, map[string]any{"containers": []any{
			map[string]any{"name": "sidecar", "image": "busybox"},
			map[string]any{"name": "main", "image": "rayproject/ray:2.44.0", "args": []any{"a0"}}}})}}
	}
	sidecar := ray.DefaultConfig()
	sidecar.LogsSidecar = &corev1.Container{Name: "shipper", Image: "fluent/fluent-bit:3.0"}
	httpMode, sidecarMode := ray.DefaultConfig(), ray.DefaultConfig()
	httpMode.SubmissionMode, sidecarMode.SubmissionMode = "HTTPMode", "SidecarMode"
	cases := []struct {
		name string
		ta   *flytev1.TaskAction
		cfg  ray.Config
	}{
		{"plain", rayAction(t, ns, "plain", 0, 0), ray.DefaultConfig()},
		{"full", withCustom("full", full, nil), ray.DefaultConfig()},
		{"head only", withCustom("head-only", &plugins.RayJob{}, nil), ray.DefaultConfig()},
		{"pod target", withCustom("pod-target", full, podTarget), ray.DefaultConfig()},
		{"logs sidecar", withCustom("logs-sidecar", full, nil), sidecar},
		{"http mode", withCustom("http-mode", full, nil), httpMode},
		{"sidecar mode", withCustom("sidecar-mode", full, nil), sidecarMode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := task.FromTaskAction(tc.ta)
			if err != nil {
				t.Fatal(err)
			}
			tc.ta.UID = "6a3c2f0e-0000-4000-8000-000000000001"
			job, err := ray.Build(plugin.TaskContext{TaskAction: tc.ta, Task: tk, Attempt: 1,
				Settings: plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}}, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := k8s.Create(context.Background(), job, client.DryRunAll); err != nil {
				t.Errorf("the API server refuses the RayJob: %v", err)
			}
		})
	}
}

// TestMissingCRD: in a cluster without KubeRay's CRDs a ray task fails at
// once, naming the kind and what to install, and is not retried.
func TestMissingCRD(t *testing.T) {
	evs := suite.MissingCRD(t, func(ns string) *flytev1.TaskAction { return rayAction(t, ns, "nocrd", 2, 0) },
		"RayJob of ray.io/v1", "rayjobs.ray.io")
	if p := enginetest.Collapsed(evs); p != "1:FAILED" {
		t.Errorf("events %s", p)
	}
}
