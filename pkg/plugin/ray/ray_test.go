package ray

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

func taskContext(t *testing.T, job *plugins.RayJob, attempt int32) plugin.TaskContext {
	t.Helper()
	ta := rayTask(t, job, func(tm *core.TaskTemplate) {
		tm.Metadata = &core.TaskMetadata{LogLinks: []*core.TaskLog{{Name: "Notebook", Uri: "https://nb/{{ .podName }}"}}}
	})
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: attempt, Settings: flyteSettings()}
}

// TestLaunchObserve: Launch creates the attempt's RayJob once (again is
// success), Observe reads it back; a missing one, or another TaskAction's,
// is not started.
func TestLaunchObserve(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	p, err := New(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	tc := taskContext(t, cluster(nil), 2)
	if obs, err := p.Observe(ctx, c, tc); err != nil || obs.Phase != plugin.PhaseNotStarted {
		t.Fatalf("before launch: %+v, %v", obs, err)
	}
	for range 2 {
		if err := p.Launch(ctx, c, tc); err != nil {
			t.Fatal(err)
		}
	}
	job := &rayv1.RayJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tc.TaskAction.Namespace, Name: "rbuild-a0-1"}, job); err != nil {
		t.Fatal(err)
	}
	if !plugin.OwnedBy(job, tc.TaskAction) || job.Labels[plugin.LabelManaged] != "true" {
		t.Errorf("the RayJob's owner %+v, labels %v", job.OwnerReferences, job.Labels)
	}
	if obs, err := p.Observe(ctx, c, tc); err != nil || obs.Phase != plugin.PhaseQueued {
		t.Errorf("after launch: %+v, %v", obs, err)
	}

	other := tc
	other.TaskAction = tc.TaskAction.DeepCopy()
	other.TaskAction.UID = "another"
	if obs, _ := p.Observe(ctx, c, other); obs.Phase != plugin.PhaseNotStarted || !strings.Contains(obs.Message, "not owned") {
		t.Errorf("another TaskAction's view: %+v", obs)
	}
	// An earlier TaskAction of the same name: waited for, never adopted.
	if err := p.Launch(ctx, c, other); !errors.Is(err, plugin.ErrResourceTerminating) {
		t.Errorf("launching over an earlier TaskAction's RayJob: %v", err)
	}
	if err := p.Validate(taskContext(t, nil, 1)); err == nil {
		t.Error("Validate accepted a template without its RayJob")
	}
}

func TestPluginIdentity(t *testing.T) {
	p, err := NewWithConfig(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != "ray" || len(p.TaskTypes()) != 1 || p.TaskTypes()[0] != "ray" {
		t.Errorf("id %s, task types %v", p.ID(), p.TaskTypes())
	}
	if r := p.Requires(); !strings.Contains(r, "rayjobs.ray.io") {
		t.Errorf("Requires() = %q", r)
	}
	if _, ok := p.WatchedTypes()[0].(*rayv1.RayJob); !ok {
		t.Errorf("watched %T", p.WatchedTypes()[0])
	}
	if n := p.ResourceName(taskContext(t, nil, 3)); n != "rbuild-a0-2" {
		t.Errorf("resource name %s", n)
	}
}

func TestLinks(t *testing.T) {
	pods, err := tasklog.New(config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesTemplateURI: "https://k8s/{{ .namespace }}/{{ .podName }}/{{ .containerName }}/{{ .taskRetryAttempt }}"})
	if err != nil {
		t.Fatal(err)
	}
	dash, err := tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "Ray Dashboard", LinkType: "dashboard",
		TemplateURIs: []string{"https://ray/{{ .rayClusterName }}/jobs/{{ .rayJobID }}"}}}})
	if err != nil {
		t.Fatal(err)
	}
	tc := taskContext(t, cluster(nil), 2)
	job := func(st rayv1.RayJobStatus) *rayv1.RayJob {
		return &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "rbuild-a0-1", Namespace: "ns"}, Status: st}
	}
	uris := func(ls []*core.TaskLog) string {
		var out []string
		for _, l := range ls {
			out = append(out, l.GetName()+"="+l.GetUri())
		}
		return strings.Join(out, " ")
	}
	cases := []struct {
		name string
		st   rayv1.RayJobStatus
		want string
	}{
		{name: "no cluster yet: none", st: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing}},
		{name: "head pod by Flyte's name", st: rayv1.RayJobStatus{RayClusterName: "rbuild-a0-1-x7k2p", JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing},
			want: "Notebook=https://nb/rbuild-a0-1-x7k2p-head Kubernetes Logs=https://k8s/ns/rbuild-a0-1-x7k2p-head/ray-head/1"},
		{name: "head pod as KubeRay names it, and the dashboard while the job runs",
			st: rayv1.RayJobStatus{RayClusterName: "c", JobId: "rbuild-a0-1-j9", DashboardURL: "c-head-svc:8265",
				JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, JobStatus: rayv1.JobStatusRunning,
				RayClusterStatus: rayv1.RayClusterStatus{Head: rayv1.HeadInfo{PodName: "c-head-q8w2z"}}},
			want: "Notebook=https://nb/c-head-q8w2z Kubernetes Logs=https://k8s/ns/c-head-q8w2z/ray-head/1 Ray Dashboard=https://ray/c/jobs/rbuild-a0-1-j9"},
		{name: "no dashboard once the job ended",
			st:   rayv1.RayJobStatus{RayClusterName: "c", DashboardURL: "c-head-svc:8265", JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusSucceeded},
			want: "Notebook=https://nb/c-head Kubernetes Logs=https://k8s/ns/c-head/ray-head/1"},
	}
	for _, tc2 := range cases {
		t.Run(tc2.name, func(t *testing.T) {
			got, err := Links(job(tc2.st), tc, pods, dash)
			if err != nil {
				t.Fatal(err)
			}
			if uris(got) != tc2.want {
				t.Errorf("links = %s\nwant    %s", uris(got), tc2.want)
			}
			for _, l := range got {
				if strings.HasPrefix(l.GetName(), "Ray Dashboard") && l.GetLinkType() != core.TaskLog_DASHBOARD {
					t.Errorf("dashboard link type %v", l.GetLinkType())
				}
			}
		})
	}
}

// TestObserveLinks: plugins.ray.logs renders the head's links when set,
// else the executor's plugins.logs (Settings.TaskLogs).
func TestObserveLinks(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	_ = rayv1.AddToScheme(s)
	executorLogs, err := tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "Executor", TemplateURIs: []string{"https://e/{{ .podName }}"}}}})
	if err != nil {
		t.Fatal(err)
	}
	own := DefaultConfig()
	own.Logs = &config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "Ray's", TemplateURIs: []string{"https://r/{{ .podName }}"}}}}
	for _, tc2 := range []struct {
		cfg  Config
		want string
	}{{DefaultConfig(), "https://e/c-head"}, {own, "https://r/c-head"}} {
		p, err := NewWithConfig(tc2.cfg)
		if err != nil {
			t.Fatal(err)
		}
		tc := taskContext(t, cluster(nil), 1)
		tc.Settings.TaskLogs = executorLogs
		job, err := Build(tc, tc2.cfg)
		if err != nil {
			t.Fatal(err)
		}
		job.Status = rayv1.RayJobStatus{RayClusterName: "c", JobDeploymentStatus: rayv1.JobDeploymentStatusRunning}
		c := fake.NewClientBuilder().WithScheme(s).WithObjects(job).Build()
		obs, err := p.Observe(ctx, c, tc)
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Logs) != 2 || obs.Logs[1].GetUri() != tc2.want {
			t.Errorf("links = %v, want the template's and %s", obs.Logs, tc2.want)
		}
	}
}
