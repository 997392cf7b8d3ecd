package clustered

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// TestTaskSpec: the spec comes from Flyte's template custom or the typed
// form's config, unknown fields ignored; Flyte's bounds are refused at once.
func TestTaskSpec(t *testing.T) {
	withUnknown, err := structpb.NewStruct(map[string]any{"replicas": 2, "nprocPerNode": 4, "futureField": "x"})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(s *plugins.ClusteredTaskSpec) *task.Task {
		return plugintest.FlyteTask(t, &core.TaskTemplate{Custom: plugintest.Custom(t, s)})
	}
	for _, tc := range []struct {
		name string
		task *task.Task
		err  string
	}{
		{"Flyte: custom", spec(&plugins.ClusteredTaskSpec{Replicas: 2, NprocPerNode: 8}), ""},
		{"Flyte: unknown fields", plugintest.FlyteTask(t, &core.TaskTemplate{Custom: withUnknown}), ""},
		{"Flyte: no custom", plugintest.FlyteTask(t, &core.TaskTemplate{}), "no custom"},
		{"no replicas", spec(&plugins.ClusteredTaskSpec{NprocPerNode: 1}), "replicas must be >= 1, got 0"},
		{"too many replicas", spec(&plugins.ClusteredTaskSpec{Replicas: MaxReplicas + 1, NprocPerNode: 1}), "replicas must be <= 100000"},
		{"the most replicas", spec(&plugins.ClusteredTaskSpec{Replicas: MaxReplicas, NprocPerNode: 1}), ""},
		{"no processes", spec(&plugins.ClusteredTaskSpec{Replicas: 1}), "nproc_per_node must be >= 1"},
		{"negative restarts", spec(&plugins.ClusteredTaskSpec{Replicas: 1, NprocPerNode: 1, FailurePolicy: &plugins.ClusterFailurePolicy{MaxRestarts: -1}}), "max_restarts must be >= 0"},
		{"TTL beyond int32", spec(&plugins.ClusteredTaskSpec{Replicas: 1, NprocPerNode: 1, TtlSecondsAfterFinished: wrapperspb.UInt32(1 << 31)}), "exceeds maximum"},
		{"typed: config", &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKeyCustom: `{"replicas": 2, "nproc_per_node": 1}`}}, ""},
		{"typed: no config", &task.Task{Form: task.FormTyped}, "spec.template.config.custom is required"},
		{"typed: not a spec", &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKeyCustom: `{"replicas": "two"}`}}, "invalid ClusteredTaskSpec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TaskSpec(tc.task)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			plugintest.WantUserFailure(t, err, CodeBadTaskSpecification, tc.err)
		})
	}
}

// TestJobSetName: Flyte's name when it fits the pods' names and is a
// DNS-1035 label; else Flyte's hash of it, which always is.
func TestJobSetName(t *testing.T) {
	long := "rclu01averyveryverylongrunnamexxxxxxxxxxxx-n1"
	for _, tc := range []struct {
		ta      string
		attempt int32
		want    string
	}{
		{"rclu01-n0", 1, "rclu01-n0-0"},
		{"rclu01-n0", 3, "rclu01-n0-2"},
		{"rclu01-n0", 0, "rclu01-n0-0"},
		{strings.Repeat("a", 39), 1, strings.Repeat("a", 39) + "-0"},
		// Recorded from Flyte (testdata/golden/c10d-restarts-longname.flyte.yaml).
		{long, 1, "flayez6q"},
	} {
		if got := JobSetName(tc.ta, tc.attempt); got != tc.want {
			t.Errorf("JobSetName(%q, %d) = %q, want %q", tc.ta, tc.attempt, got, tc.want)
		}
	}
	for _, name := range []string{long, strings.Repeat("a", 40), "0starts-with-a-digit", "dotted.name", strings.Repeat("z", 253)} {
		got := JobSetName(name, 1)
		if pod := got + "-workers-0-99999-abcde"; len(validation.IsDNS1035Label(pod)) > 0 {
			t.Errorf("JobSetName(%q) = %q: the longest pod name %q is not a DNS-1035 label", name, got, pod)
		}
		if got == JobSetName(name, 2) {
			t.Errorf("JobSetName(%q) is the same for two attempts", name)
		}
	}
}

// TestTorchRunEnv: the plugin's variables replace the task's of the same
// name in place and come after the others.
func TestTorchRunEnv(t *testing.T) {
	env := container.MergeEnv([]corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "MASTER_PORT", Value: "1"}, {Name: "B", Value: "2"}},
		torchRunEnv(&plugins.ClusteredTaskSpec{Replicas: 4, NprocPerNode: 8, Runtime: torchrun(plugins.RdzvBackend_C10D),
			FailurePolicy: &plugins.ClusterFailurePolicy{MaxRestarts: 2}}))
	var names []string
	values := map[string]string{}
	for _, e := range env {
		names = append(names, e.Name)
		values[e.Name] = e.Value
		if e.ValueFrom != nil {
			values[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if got := strings.Join(names, " "); got != "A MASTER_PORT B NNODES NPROC_PER_NODE RDZV_BACKEND JOBSET_MAX_RESTARTS JOBSET_NAME JOBSET_RESTART_ATTEMPT POD_NAMESPACE" {
		t.Errorf("order %s", got)
	}
	for k, v := range map[string]string{"MASTER_PORT": "29500", "NNODES": "4", "NPROC_PER_NODE": "8", "RDZV_BACKEND": "c10d", "JOBSET_MAX_RESTARTS": "2",
		"JOBSET_NAME": "metadata.labels['jobset.sigs.k8s.io/jobset-name']", "JOBSET_RESTART_ATTEMPT": "metadata.annotations['jobset.sigs.k8s.io/restart-attempt']",
		"POD_NAMESPACE": "metadata.namespace"} {
		if values[k] != v {
			t.Errorf("%s = %q, want %q", k, values[k], v)
		}
	}
	if v := torchRunEnv(&plugins.ClusteredTaskSpec{Replicas: 1, NprocPerNode: 1}); v[3].Value != "static" || v[4].Value != "0" {
		t.Errorf("defaults: %v", v)
	}
}

// TestSanitizeLabelValue: Flyte's rule for the execution label.
func TestSanitizeLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "none",
		"rclu01":                       "rclu01",
		"-run-":                        "xrunx",
		"run name/ü":                   "run-name-x",
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62) + "x",
	} {
		if got := sanitizeLabelValue(in); got != want {
			t.Errorf("sanitizeLabelValue(%q) = %q, want %q", in, got, want)
		}
		if errs := validation.IsValidLabelValue(sanitizeLabelValue(in)); len(errs) > 0 {
			t.Errorf("%q: %v", in, errs)
		}
	}
}

func cond(typ jobsetv1alpha2.JobSetConditionType, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: string(typ), Status: status, Reason: reason, Message: reason + " message", LastTransitionTime: metav1.NewTime(at)}
}

// TestObserveJobSet: the status mapping (Flyte's phases, messages, codes
// and kinds; TestGoldenPhases holds them against Flyte's plugin) with the
// conditions' times.
func TestObserveJobSet(t *testing.T) {
	created := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	t1, t2 := created.Add(time.Minute), created.Add(2*time.Minute)
	active := []jobsetv1alpha2.ReplicatedJobStatus{{Name: WorkersReplicatedJob, Active: 1}}
	ran := &flytev1.TaskAction{Status: flytev1.TaskActionStatus{Attempts: 1, PluginPhase: string(plugin.PhaseRunning)}}
	earlier := &flytev1.TaskAction{Status: flytev1.TaskActionStatus{Attempts: 2, PluginPhase: string(plugin.PhaseRunning)}}
	for _, tc := range []struct {
		name     string
		status   jobsetv1alpha2.JobSetStatus
		ta       *flytev1.TaskAction
		phase    plugin.Phase
		msg      string
		at       time.Time
		finished bool
		code     string
	}{
		{"nothing yet", jobsetv1alpha2.JobSetStatus{}, nil, plugin.PhaseInitializing, "pods scheduling / DNS resolving", created, false, ""},
		{"workers active", jobsetv1alpha2.JobSetStatus{ReplicatedJobsStatus: active}, nil, plugin.PhaseRunning, "running (restart attempt 0)", time.Time{}, false, ""},
		{"another replicated job active", jobsetv1alpha2.JobSetStatus{ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "other", Active: 1}}}, nil, plugin.PhaseInitializing, "pods scheduling / DNS resolving", created, false, ""},
		{"restarted", jobsetv1alpha2.JobSetStatus{Restarts: 2}, nil, plugin.PhaseRunning, "running (restart attempt 2)", time.Time{}, false, ""},
		{"reported running before", jobsetv1alpha2.JobSetStatus{}, ran, plugin.PhaseRunning, "running (restart attempt 0)", time.Time{}, false, ""},
		{"another attempt ran", jobsetv1alpha2.JobSetStatus{}, earlier, plugin.PhaseInitializing, "pods scheduling / DNS resolving", created, false, ""},
		{"restarting", jobsetv1alpha2.JobSetStatus{Restarts: 1, Conditions: []metav1.Condition{cond(jobsetv1alpha2.JobSetRestarting, metav1.ConditionTrue, "Restarting", t1)}},
			nil, plugin.PhaseRunning, "restart in progress (attempt 1)", t1, false, ""},
		{"suspended", jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{cond(jobsetv1alpha2.JobSetSuspended, metav1.ConditionTrue, "SuspendedJobs", t1)}},
			nil, plugin.PhaseQueued, "suspended: SuspendedJobs message", t1, false, ""},
		{"resumed", jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{cond(jobsetv1alpha2.JobSetSuspended, metav1.ConditionFalse, "ResumeJobs", t1)}},
			nil, plugin.PhaseInitializing, "pods scheduling / DNS resolving", created, false, ""},
		{"completed", jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{
			cond(jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue, "StartupPolicyCompleted", t1),
			cond(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, "AllJobsCompleted", t2)}}, nil, plugin.PhaseSucceeded, "", t2, true, ""},
		{"failed", jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{cond(jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue, "ReachedMaxRestarts", t2)}},
			nil, plugin.PhaseRetryableFailure, "", t2, true, "ReachedMaxRestarts"},
		{"same second: the later in the list", jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{
			cond(jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue, "StartupPolicyCompleted", t2),
			cond(jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue, "FailedJobs", t2)}}, nil, plugin.PhaseRetryableFailure, "", t2, true, "FailedJobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "j", CreationTimestamp: metav1.NewTime(created)}, Status: tc.status}
			obs := ObserveJobSet(js, tc.ta, 1)
			if obs.Phase != tc.phase || obs.Message != tc.msg || !obs.OccurredAt.Equal(tc.at) || obs.Finished != tc.finished {
				t.Errorf("got %+v; want %s %q at %v, finished %v", obs, tc.phase, tc.msg, tc.at, tc.finished)
			}
			switch {
			case tc.code == "" && obs.Error != nil:
				t.Errorf("error %+v", obs.Error)
			case tc.code != "" && (obs.Error == nil || obs.Error.Code != tc.code || obs.Error.Kind != flytev1.ErrorKindUser || obs.Error.Message != tc.code+" message"):
				t.Errorf("error %+v; want a user failure %s", obs.Error, tc.code)
			}
		})
	}
	deleting := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: t1}}}
	if !ObserveJobSet(deleting, nil, 1).Deleting {
		t.Errorf("a JobSet being deleted is not reported so")
	}
}

// TestJobSetLogs: one set of links per rank, at most maxLinkedRanks; the
// end time once the JobSet ended; none without a renderer.
func TestJobSetLogs(t *testing.T) {
	r, err := tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "L ",
		TemplateURIs: []string{"https://l/{{ .podName }}/{{ .containerName }}/{{ .podUnixStartTime }}-{{ .podUnixFinishTime }}"}}}})
	if err != nil {
		t.Fatal(err)
	}
	tc := taskContext(t, clusteredTemplate(t, &plugins.ClusteredTaskSpec{Replicas: 250, NprocPerNode: 1}))
	js, err := (&Plugin{}).build(tc)
	if err != nil {
		t.Fatal(err)
	}
	js.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	links, err := JobSetLogs(r, tc, js, time.Unix(2000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != maxLinkedRanks {
		t.Fatalf("%d links, want %d", len(links), maxLinkedRanks)
	}
	if l := links[7]; l.GetName() != "L rank-7" || l.GetUri() != "https://l/rclu02-n0-0-workers-0-7/rclu02-n0-0/1000-2000" {
		t.Errorf("rank 7: %s %s", l.GetName(), l.GetUri())
	}
	if links, err := JobSetLogs(nil, tc, js, time.Time{}); links != nil || err != nil {
		t.Errorf("no renderer: %v, %v", links, err)
	}
}

func taskContext(t *testing.T, tmpl *core.TaskTemplate) plugin.TaskContext {
	t.Helper()
	ta := flyteTaskAction(t, "rclu02", "n0", tmpl)
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: flyteSettings(nil)}
}

func clusteredTemplate(t *testing.T, spec *plugins.ClusteredTaskSpec) *core.TaskTemplate {
	return &core.TaskTemplate{Id: plugintest.TaskID("train.t"), Type: ID,
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "img", Args: []string{"run"}}},
		Custom: plugintest.Custom(t, spec)}
}

// TestBuild: the JobSet's shape, restart policy and subdomain, the task's
// metadata and the labels the JobSet controller and the executor need.
func TestBuild(t *testing.T) {
	tc := taskContext(t, clusteredTemplate(t, &plugins.ClusteredTaskSpec{Replicas: 3, NprocPerNode: 2,
		FailurePolicy: &plugins.ClusterFailurePolicy{MaxRestarts: 0}}))
	js, err := (&Plugin{}).build(tc)
	if err != nil {
		t.Fatal(err)
	}
	rj := js.Spec.ReplicatedJobs
	if len(rj) != 1 || rj[0].Name != WorkersReplicatedJob || rj[0].Replicas != 1 {
		t.Fatalf("replicated jobs %+v", rj)
	}
	job := rj[0].Template.Spec
	if *job.Parallelism != 3 || *job.Completions != 3 || *job.BackoffLimit != 0 || *job.CompletionMode != "Indexed" {
		t.Errorf("job %+v", job)
	}
	pod := job.Template
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.Subdomain != js.Name {
		t.Errorf("pod spec restart %s, subdomain %s", pod.Spec.RestartPolicy, pod.Spec.Subdomain)
	}
	if js.Spec.FailurePolicy != nil {
		t.Errorf("no restarts, failure policy %+v", js.Spec.FailurePolicy)
	}
	if js.Labels[plugin.LabelManaged] != "true" || pod.Labels[plugin.LabelManaged] != "true" || js.Labels[LabelExecution] != "rclu02" {
		t.Errorf("labels %v, %v", js.Labels, pod.Labels)
	}
	if js.Annotations[AnnotationPrimaryContainer] != pod.Spec.Containers[0].Name || js.Annotations[AnnotationTaskType] != ID {
		t.Errorf("annotations %v", js.Annotations)
	}
	if _, ok := pod.Annotations["primary_container_name"]; ok {
		t.Errorf("pod annotations %v", pod.Annotations)
	}
	if !plugin.OwnedBy(js, tc.TaskAction) {
		t.Errorf("owner %+v", js.OwnerReferences)
	}
}

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := (&Plugin{}).AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&jobsetv1alpha2.JobSet{}).Build()
}

// TestLaunchObserve: Launch creates the attempt's JobSet once (again is
// success), Observe reads it with the ranks' links; someone else's JobSet
// under the name is neither adopted nor read; a bad spec fails validation.
func TestLaunchObserve(t *testing.T) {
	ctx := context.Background()
	p, err := New(config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != ID || len(p.TaskTypes()) != 1 || p.TaskTypes()[0] != ID || p.Requires() == "" {
		t.Errorf("identity %s %v %q", p.ID(), p.TaskTypes(), p.Requires())
	}
	r, err := tasklog.New(config.DefaultTaskLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	tc := taskContext(t, clusteredTemplate(t, &plugins.ClusteredTaskSpec{Replicas: 2, NprocPerNode: 1}))
	tc.Settings.TaskLogs = r
	c := fakeClient(t)
	if obs, err := p.Observe(ctx, c, tc); err != nil || obs.Phase != plugin.PhaseNotStarted {
		t.Fatalf("before launch: %+v, %v", obs, err)
	}
	for i := 0; i < 2; i++ {
		if err := p.Launch(ctx, c, tc); err != nil {
			t.Fatalf("launch %d: %v", i+1, err)
		}
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "flyte", Name: p.ResourceName(tc)}, js); err != nil {
		t.Fatal(err)
	}
	js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: WorkersReplicatedJob, Active: 1}}
	if err := c.Status().Update(ctx, js); err != nil {
		t.Fatal(err)
	}
	obs, err := p.Observe(ctx, c, tc)
	if err != nil || obs.Phase != plugin.PhaseRunning || len(obs.Logs) != 2 ||
		obs.Logs[1].GetUri() != "http://localhost:30082/#!/log/flyte/rclu02-n0-0-workers-0-1/pod?namespace=flyte" {
		t.Errorf("running: %+v, %v", obs, err)
	}
	other := tc
	other.TaskAction = tc.TaskAction.DeepCopy()
	other.TaskAction.UID = "someone-else"
	if obs, err := p.Observe(ctx, c, other); err != nil || obs.Phase != plugin.PhaseNotStarted || obs.Message == "" {
		t.Errorf("another TaskAction's JobSet: %+v, %v", obs, err)
	}
	foreign := js.DeepCopy()
	foreign.ResourceVersion, foreign.OwnerReferences = "", nil
	var le *plugin.LaunchError
	if err := p.Launch(ctx, fakeClient(t, foreign), tc); !errors.As(err, &le) || le.Err.Code != plugin.CodeAlreadyExists {
		t.Errorf("a JobSet that is not ours under the name: %v", err)
	}
	bad := taskContext(t, clusteredTemplate(t, &plugins.ClusteredTaskSpec{Replicas: 2}))
	if err := p.Validate(bad); !errors.As(err, &le) || le.Err.Code != CodeBadTaskSpecification {
		t.Errorf("no processes per node: %v", err)
	}
	if err := p.Launch(ctx, c, bad); !errors.As(err, &le) {
		t.Errorf("launch of a bad spec: %v", err)
	}
}
