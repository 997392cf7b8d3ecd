package dask

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/tasklog"
)

// TestObserveJob: the status mapping (Flyte's phases, codes and kinds;
// TestGoldenPhases holds them against Flyte's plugin) with the times the
// operator recorded.
func TestObserveJob(t *testing.T) {
	created := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	start, end := created.Add(5*time.Second), created.Add(3*time.Minute)
	for _, tc := range []struct {
		name     string
		status   daskv1.DaskJobStatus
		deleting bool
		phase    plugin.Phase
		at       time.Time
		finished bool
		code     string
	}{
		{"no status yet", daskv1.DaskJobStatus{}, false, plugin.PhaseInitializing, created, false, ""},
		{"job created", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobCreated}, false, plugin.PhaseInitializing, created, false, ""},
		{"cluster created", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobClusterCreated}, false, plugin.PhaseInitializing, created, false, ""},
		{"running", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobRunning, StartTime: metav1.NewTime(start)}, false, plugin.PhaseRunning, start, false, ""},
		{"running, no start recorded", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobRunning}, false, plugin.PhaseRunning, created, false, ""},
		{"a status of a later operator", daskv1.DaskJobStatus{JobStatus: "Suspended"}, false, plugin.PhaseRunning, created, false, ""},
		{"successful", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobSuccessful, StartTime: metav1.NewTime(start), EndTime: metav1.NewTime(end)}, false, plugin.PhaseSucceeded, end, true, ""},
		{"failed", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobFailed, JobRunnerPodName: "j-runner", StartTime: metav1.NewTime(start), EndTime: metav1.NewTime(end)}, false, plugin.PhaseRetryableFailure, end, true, CodeDaskJobFailed},
		{"running, being deleted", daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobRunning, StartTime: metav1.NewTime(start)}, true, plugin.PhaseRunning, start, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &daskv1.DaskJob{ObjectMeta: metav1.ObjectMeta{Name: "j", CreationTimestamp: metav1.NewTime(created)}, Status: tc.status}
			if tc.deleting {
				now := metav1.NewTime(end)
				job.DeletionTimestamp = &now
			}
			obs := ObserveJob(job)
			if obs.Phase != tc.phase || !obs.OccurredAt.Equal(tc.at) || obs.Finished != tc.finished || obs.Deleting != tc.deleting {
				t.Errorf("got %+v; want phase %s at %v, finished %v", obs, tc.phase, tc.at, tc.finished)
			}
			switch {
			case tc.code == "" && obs.Error != nil:
				t.Errorf("error %+v", obs.Error)
			case tc.code != "" && (obs.Error == nil || obs.Error.Code != tc.code || obs.Error.Kind != flytev1.ErrorKindUser):
				t.Errorf("error %+v; want a user failure %s", obs.Error, tc.code)
			}
		})
	}
}

// TestJobLogs: the runner pod's links, the scheduler variable rendered
// empty (and so left as written), the VS Code link when the scheduler's
// environment asks for it, dashboards ready only while the job runs.
func TestJobLogs(t *testing.T) {
	r, err := tasklog.New(config.TaskLogConfig{
		DynamicLogLinks: map[string]config.TaskLogTemplate{"vscode": {DisplayName: "VS Code", TemplateURIs: []string{"https://ide/{{ .podName }}"}}},
		Templates: []config.TaskLogTemplate{
			{DisplayName: "dash", LinkType: "dashboard", TemplateURIs: []string{"https://dash/{{ .generatedName }}/status"}},
			{DisplayName: "sched", TemplateURIs: []string{"https://logs/{{ .daskSchedulerName }}/{{ .podName }}"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tc := taskContext(t, daskTemplate(t, &plugins.DaskJob{}))
	job := &daskv1.DaskJob{ObjectMeta: metav1.ObjectMeta{Name: "rdask02-n0-0", Namespace: "flyte"},
		Status: daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobRunning, JobRunnerPodName: "rdask02-n0-0-runner"}}
	job.Spec.Cluster.Spec.Scheduler.Spec.Containers = []corev1.Container{{Name: "scheduler", Env: []corev1.EnvVar{{Name: "_F_E_VS", Value: "True"}}}}
	links, err := JobLogs(r, tc, job, plugin.PhaseRunning)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"dash":    "https://dash/rdask02-n0-0/status",
		"sched":   "https://logs/{{ .daskSchedulerName }}/rdask02-n0-0-runner",
		"VS Code": "https://ide/rdask02-n0-0-runner",
	}
	if len(links) != len(want) {
		t.Fatalf("links %v", links)
	}
	for _, l := range links {
		if want[l.GetName()] != l.GetUri() {
			t.Errorf("link %s = %s, want %s", l.GetName(), l.GetUri(), want[l.GetName()])
		}
		if l.GetName() == "VS Code" && l.GetLinkType() != core.TaskLog_IDE {
			t.Errorf("the VS Code link is %s", l.GetLinkType())
		}
		if (l.GetLinkType() == core.TaskLog_DASHBOARD || l.GetLinkType() == core.TaskLog_IDE) && !l.GetReady() {
			t.Errorf("%s is not ready while the job runs", l.GetName())
		}
	}
	links, err = JobLogs(r, tc, job, plugin.PhaseSucceeded)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.GetLinkType() == core.TaskLog_DASHBOARD && l.GetReady() {
			t.Errorf("the dashboard is ready after the job ended")
		}
	}
	job.Spec.Cluster.Spec.Scheduler.Spec.Containers[0].Env[0].Value = "no"
	if links, _ := JobLogs(r, tc, job, plugin.PhaseRunning); len(links) != 2 {
		t.Errorf("links %v: want no VS Code link", links)
	}
	if links, err := JobLogs(nil, tc, job, plugin.PhaseRunning); links != nil || err != nil {
		t.Errorf("no renderer: %v, %v", links, err)
	}
}

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := (&Plugin{}).AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&daskv1.DaskJob{}).Build()
}

// TestLaunchObserve: Launch creates the attempt's DaskJob once (again is
// success), Observe reads it; someone else's DaskJob under the name is
// neither adopted nor read; a task without a DaskJob fails validation.
func TestLaunchObserve(t *testing.T) {
	ctx := context.Background()
	p, err := New(config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != "dask" || len(p.TaskTypes()) != 1 || p.TaskTypes()[0] != "dask" || p.Requires() == "" {
		t.Errorf("identity %s %v %q", p.ID(), p.TaskTypes(), p.Requires())
	}
	tc := taskContext(t, daskTemplate(t, &plugins.DaskJob{Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 2}}))
	c := fakeClient(t)
	if obs, err := p.Observe(ctx, c, tc); err != nil || obs.Phase != plugin.PhaseNotStarted {
		t.Fatalf("before launch: %+v, %v", obs, err)
	}
	if err := p.Validate(tc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := p.Launch(ctx, c, tc); err != nil {
			t.Fatalf("launch %d: %v", i+1, err)
		}
	}
	job := &daskv1.DaskJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "flyte", Name: p.ResourceName(tc)}, job); err != nil {
		t.Fatal(err)
	}
	job.Status = daskv1.DaskJobStatus{JobStatus: daskv1.DaskJobRunning, JobRunnerPodName: job.Name + "-runner"}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	obs, err := p.Observe(ctx, c, tc)
	if err != nil || obs.Phase != plugin.PhaseRunning || len(obs.Logs) != 1 || obs.Logs[0].GetUri() != "http://localhost:30082/#!/log/flyte/rdask02-n0-0-runner/pod?namespace=flyte" {
		t.Errorf("running: %+v, %v", obs, err)
	}

	other := taskContext(t, daskTemplate(t, &plugins.DaskJob{}))
	other.TaskAction.UID = "someone-else"
	if obs, err := p.Observe(ctx, c, other); err != nil || obs.Phase != plugin.PhaseNotStarted || obs.Message == "" {
		t.Errorf("another TaskAction's job: %+v, %v", obs, err)
	}
	var le *plugin.LaunchError
	foreign := job.DeepCopy()
	foreign.ResourceVersion, foreign.OwnerReferences = "", nil
	c3 := fakeClient(t, foreign)
	if err := p.Launch(ctx, c3, tc); !errors.As(err, &le) || le.Err.Code != plugin.CodeAlreadyExists {
		t.Errorf("a DaskJob that is not ours under the name: %v", err)
	}

	bad := taskContext(t, &core.TaskTemplate{Id: plugintest.TaskID("wf.t"), Type: "dask",
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "img"}}})
	if err := p.Validate(bad); !errors.As(err, &le) || le.Err.Code != CodeBadTaskSpecification {
		t.Errorf("no custom: %v", err)
	}
	if err := p.Launch(ctx, c, bad); !errors.As(err, &le) {
		t.Errorf("launch without custom: %v", err)
	}
}
