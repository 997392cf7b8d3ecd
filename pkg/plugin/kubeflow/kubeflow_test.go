package kubeflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/tasklog"
)

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, flytev1.AddToScheme, (&Plugin{}).AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// TestLaunchAndObserve: Launch creates the attempt's job, controlled by the
// TaskAction, and is idempotent; Observe reads it back through the job's
// conditions; a job of the name that is not the TaskAction's is not the
// attempt's, and Launch refuses it.
func TestLaunchAndObserve(t *testing.T) {
	ctx := context.Background()
	tc := goldenTaskContext(t, "tensorflow")
	tc.Now = time.Now()
	p, err := NewPlugin(TensorFlow, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := fakeClient(t)
	if obs, err := p.Observe(ctx, c, tc); err != nil || obs.Phase != plugin.PhaseNotStarted {
		t.Fatalf("before the launch: %+v, %v", obs, err)
	}
	for range 2 {
		if err := p.Launch(ctx, c, tc); err != nil {
			t.Fatal(err)
		}
	}
	job := &kubeflowv1.TFJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tc.TaskAction.Namespace, Name: p.ResourceName(tc)}, job); err != nil {
		t.Fatal(err)
	}
	if !plugin.OwnedBy(job, tc.TaskAction) || job.Labels[plugin.LabelManaged] != "true" {
		t.Errorf("the job's owner %v and labels %v; want the TaskAction as its controller and the managed label", job.OwnerReferences, job.Labels)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second)) // as the API stores it
	job.Status = kubeflowv1.JobStatus{StartTime: &now, Conditions: []kubeflowv1.JobCondition{
		{Type: kubeflowv1.JobRunning, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if err := c.Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	if obs, err := p.Observe(ctx, c, tc); err != nil || obs.Phase != plugin.PhaseRunning || !obs.OccurredAt.Equal(now.Time) {
		t.Errorf("running: %+v, %v", obs, err)
	}

	other := tc
	other.TaskAction = tc.TaskAction.DeepCopy()
	other.TaskAction.UID = "another-uid"
	if obs, err := p.Observe(ctx, c, other); err != nil || obs.Phase != plugin.PhaseNotStarted || !strings.Contains(obs.Message, "not owned") {
		t.Errorf("another TaskAction's job: %+v, %v", obs, err)
	}
	other.TaskAction.Name = "someone-else"
	other.TaskAction.OwnerReferences = nil
	foreign := job.DeepCopy()
	foreign.ResourceVersion, foreign.OwnerReferences = "", nil
	foreign.Name = p.ResourceName(other)
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	var le *plugin.LaunchError
	if err := p.Launch(ctx, c, other); !errors.As(err, &le) || le.Err.Code != plugin.CodeAlreadyExists {
		t.Errorf("launch over a job of the name that is not ours: %v; want AlreadyExists", err)
	}
}

// TestPluginInterface: IDs, task types and the watched kinds are Flyte's;
// what to install names the CRD.
func TestPluginInterface(t *testing.T) {
	ps, err := New(config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		kind client.Object
		crd  string
	}{
		PyTorch:    {&kubeflowv1.PyTorchJob{}, "pytorchjobs.kubeflow.org"},
		TensorFlow: {&kubeflowv1.TFJob{}, "tfjobs.kubeflow.org"},
		MPI:        {&kubeflowv1.MPIJob{}, "mpijobs.kubeflow.org"},
	}
	for _, p := range ps {
		w := want[p.ID()]
		if tt := p.TaskTypes(); len(tt) != 1 || tt[0] != p.ID() {
			t.Errorf("%s serves %v", p.ID(), tt)
		}
		if wt := p.WatchedTypes(); len(wt) != 1 || fmt.Sprintf("%T", wt[0]) != fmt.Sprintf("%T", w.kind) {
			t.Errorf("%s watches %T; want %T", p.ID(), wt[0], w.kind)
		}
		if r := p.(plugin.Requirer).Requires(); !strings.Contains(r, w.crd) || !strings.Contains(r, "training-operator") {
			t.Errorf("%s requires %q", p.ID(), r)
		}
	}
	if _, err := NewPlugin("jax", DefaultConfig()); err == nil {
		t.Error("a plugin for jax")
	}
}

// TestLogLinks: each replica pod of the job gets the configured links, named
// by its replica, group by group (PyTorch: master then workers; TensorFlow:
// workers, parameter servers, chief, evaluator; MPI: launcher then workers),
// at most maxLinkedReplicas of a group.
func TestLogLinks(t *testing.T) {
	r, err := tasklog.New(config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		groups []replicaCount
		want   []string
	}{
		{"pytorch", []replicaCount{{kubeflowv1.PyTorchJobReplicaTypeMaster, 1}, {kubeflowv1.PyTorchJobReplicaTypeWorker, 2}},
			[]string{"Kubernetes Logs (master-0) http://dashboard/#!/log/ns/job-0-master-0/pod?namespace=ns",
				"Kubernetes Logs (worker-0) http://dashboard/#!/log/ns/job-0-worker-0/pod?namespace=ns",
				"Kubernetes Logs (worker-1) http://dashboard/#!/log/ns/job-0-worker-1/pod?namespace=ns"}},
		{"tensorflow", []replicaCount{{kubeflowv1.TFJobReplicaTypeWorker, 1}, {kubeflowv1.TFJobReplicaTypePS, 1}, {kubeflowv1.TFJobReplicaTypeChief, 1}, {kubeflowv1.TFJobReplicaTypeEval, 1}},
			[]string{"Kubernetes Logs (worker-0) http://dashboard/#!/log/ns/job-0-worker-0/pod?namespace=ns",
				"Kubernetes Logs (ps-0) http://dashboard/#!/log/ns/job-0-ps-0/pod?namespace=ns",
				"Kubernetes Logs (chief-0) http://dashboard/#!/log/ns/job-0-chief-0/pod?namespace=ns",
				"Kubernetes Logs (evaluator-0) http://dashboard/#!/log/ns/job-0-evaluator-0/pod?namespace=ns"}},
		{"mpi", []replicaCount{{kubeflowv1.MPIJobReplicaTypeLauncher, 1}, {kubeflowv1.MPIJobReplicaTypeWorker, 1}},
			[]string{"Kubernetes Logs (launcher-0) http://dashboard/#!/log/ns/job-0-launcher-0/pod?namespace=ns",
				"Kubernetes Logs (worker-0) http://dashboard/#!/log/ns/job-0-worker-0/pod?namespace=ns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links, err := jobLogs(r, goldenTaskContext(t, "tensorflow"), jobState{namespace: "ns", name: "job-0", created: created}, tc.groups, "tensorflow")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range links {
				got = append(got, l.GetName()+" "+l.GetUri())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	links, err := jobLogs(r, goldenTaskContext(t, "tensorflow"), jobState{namespace: "ns", name: "job-0"},
		[]replicaCount{{kubeflowv1.TFJobReplicaTypeWorker, 5000}}, "tensorflow")
	if err != nil || len(links) != maxLinkedReplicas {
		t.Errorf("5000 workers: %d links, %v; want %d", len(links), err, maxLinkedReplicas)
	}
	if links, err := jobLogs(nil, goldenTaskContext(t, "tensorflow"), jobState{}, []replicaCount{{kubeflowv1.TFJobReplicaTypeWorker, 1}}, "tensorflow"); err != nil || links != nil {
		t.Errorf("without a log configuration: %v, %v", links, err)
	}
}

// TestObserveLogs: Observe attaches the links of the job's replica groups as
// its spec has them (an elastic PyTorchJob has no master).
func TestObserveLogs(t *testing.T) {
	ctx := context.Background()
	tc := goldenTaskContext(t, "pytorch-elastic")
	r, err := tasklog.New(config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"})
	if err != nil {
		t.Fatal(err)
	}
	tc.Settings.TaskLogs = r
	p, err := NewPlugin(PyTorch, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := fakeClient(t)
	if err := p.Launch(ctx, c, tc); err != nil {
		t.Fatal(err)
	}
	obs, err := p.Observe(ctx, c, tc)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Logs) != 2 || !strings.HasSuffix(obs.Logs[0].GetName(), "(worker-0)") || !strings.HasSuffix(obs.Logs[1].GetName(), "(worker-1)") {
		t.Errorf("links %v; want one per worker", obs.Logs)
	}
}
