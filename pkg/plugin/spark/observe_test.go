package spark

import (
	"context"
	"strings"
	"testing"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func app(state sparkv1beta2.ApplicationStateType, mut ...func(*sparkv1beta2.SparkApplication)) *sparkv1beta2.SparkApplication {
	a := &sparkv1beta2.SparkApplication{
		ObjectMeta: metav1.ObjectMeta{Name: "etl-0", Namespace: "ns", CreationTimestamp: at(0)},
		Status:     sparkv1beta2.SparkApplicationStatus{AppState: sparkv1beta2.ApplicationState{State: state}},
	}
	for _, m := range mut {
		m(a)
	}
	return a
}

func submitted(d time.Duration) func(*sparkv1beta2.SparkApplication) {
	return func(a *sparkv1beta2.SparkApplication) { a.Status.LastSubmissionAttemptTime = at(d) }
}

func terminated(d time.Duration) func(*sparkv1beta2.SparkApplication) {
	return func(a *sparkv1beta2.SparkApplication) { a.Status.TerminationTime = at(d) }
}

func errorMessage(m string) func(*sparkv1beta2.SparkApplication) {
	return func(a *sparkv1beta2.SparkApplication) { a.Status.AppState.ErrorMessage = m }
}

func deleting(a *sparkv1beta2.SparkApplication) { d := at(time.Hour); a.DeletionTimestamp = &d }

// TestObserveStatus is Flyte's status mapping: not seen by the operator yet,
// queued; submitted (or the old operators' PENDING_SUBMISSION),
// initializing; completed, succeeded; failed or refused at submission, a
// retryable user failure (DownstreamSystemError) with the operator's
// message; any other state, running. Each end is Finished (the application
// stays for its logs) as of its termination time, else its last submission,
// else its creation. An application deleted before it ended is a system
// failure; one that ended stands.
func TestObserveStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		app      *sparkv1beta2.SparkApplication
		phase    plugin.Phase
		finished bool
		at       time.Time
		code     string
		kind     flytev1.ErrorKind
		msg      string
	}{
		{name: "new", app: app(sparkv1beta2.ApplicationStateNew), phase: plugin.PhaseQueued, at: t0, msg: "job queued"},
		{name: "submitted", app: app(sparkv1beta2.ApplicationStateSubmitted, submitted(time.Second)), phase: plugin.PhaseInitializing, at: t0.Add(time.Second), msg: "job submitted"},
		{name: "pending submission (operators before 2.x)", app: app("PENDING_SUBMISSION"), phase: plugin.PhaseInitializing, msg: "job submitted"},
		{name: "running", app: app(sparkv1beta2.ApplicationStateRunning), phase: plugin.PhaseRunning, msg: "job running"},
		{name: "pending rerun", app: app(sparkv1beta2.ApplicationStatePendingRerun), phase: plugin.PhaseRunning},
		{name: "succeeding", app: app(sparkv1beta2.ApplicationStateSucceeding), phase: plugin.PhaseRunning},
		{name: "failing", app: app(sparkv1beta2.ApplicationStateFailing), phase: plugin.PhaseRunning},
		{name: "unknown", app: app(sparkv1beta2.ApplicationStateUnknown), phase: plugin.PhaseRunning},
		{name: "completed", app: app(sparkv1beta2.ApplicationStateCompleted, submitted(time.Second), terminated(time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, at: t0.Add(time.Minute)},
		{name: "completed without a termination time", app: app(sparkv1beta2.ApplicationStateCompleted, submitted(time.Second)),
			phase: plugin.PhaseSucceeded, finished: true, at: t0.Add(time.Second)},
		{name: "completed without any time", app: app(sparkv1beta2.ApplicationStateCompleted), phase: plugin.PhaseSucceeded, finished: true, at: t0},
		{name: "failed", app: app(sparkv1beta2.ApplicationStateFailed, terminated(time.Minute), errorMessage("driver container failed with ExitCode: 1")),
			phase: plugin.PhaseRetryableFailure, finished: true, at: t0.Add(time.Minute), code: CodeDownstreamSystemError, kind: flytev1.ErrorKindUser,
			msg: "Spark Job Failed with Error: driver container failed with ExitCode: 1"},
		{name: "submission failed", app: app(sparkv1beta2.ApplicationStateFailedSubmission, submitted(time.Second), errorMessage("quota")),
			phase: plugin.PhaseRetryableFailure, finished: true, at: t0.Add(time.Second), code: CodeDownstreamSystemError, kind: flytev1.ErrorKindUser,
			msg: "Spark Job Submission Failed with Error: quota"},
		{name: "deleted while running", app: app(sparkv1beta2.ApplicationStateRunning, deleting),
			phase: plugin.PhaseRetryableFailure, code: CodeUnexpectedObjectDeletion, kind: flytev1.ErrorKindSystem, msg: "being deleted before it ended"},
		{name: "deleted once completed", app: app(sparkv1beta2.ApplicationStateCompleted, terminated(time.Minute), deleting),
			phase: plugin.PhaseSucceeded, finished: true, at: t0.Add(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := ObserveStatus(tc.app)
			if obs.Phase != tc.phase || obs.Finished != tc.finished || !obs.OccurredAt.Equal(tc.at) {
				t.Errorf("got %s finished=%v at %v; want %s finished=%v at %v", obs.Phase, obs.Finished, obs.OccurredAt, tc.phase, tc.finished, tc.at)
			}
			if obs.Deleting != (tc.app.DeletionTimestamp != nil) {
				t.Errorf("deleting %v", obs.Deleting)
			}
			if !strings.Contains(obs.Message, tc.msg) {
				t.Errorf("message %q; want it to contain %q", obs.Message, tc.msg)
			}
			switch {
			case tc.code == "" && obs.Error != nil:
				t.Errorf("error %+v; want none", obs.Error)
			case tc.code != "" && (obs.Error == nil || obs.Error.Code != tc.code || obs.Error.Kind != tc.kind || obs.Error.Message != obs.Message):
				t.Errorf("error %+v; want code %s kind %s", obs.Error, tc.code, tc.kind)
			}
		})
	}
}

// TestObserveStatusBoundsTheOperatorsMessage: an error message of any size is kept
// to a bounded prefix.
func TestObserveStatusBoundsTheOperatorsMessage(t *testing.T) {
	obs := ObserveStatus(app(sparkv1beta2.ApplicationStateFailed, errorMessage(strings.Repeat("é", 1<<20))))
	if len(obs.Message) > maxMessage || len(obs.Error.Message) > maxMessage || !strings.HasSuffix(obs.Message, "...") {
		t.Errorf("message of %d bytes", len(obs.Message))
	}
}

func linkNames(ls []*core.TaskLog) string {
	var out []string
	for _, l := range ls {
		s := l.GetName() + "=" + l.GetUri()
		if l.GetShowWhilePending() {
			s += " (pending too)"
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

func logsPlugin(t *testing.T, mut func(*Config)) *Plugin {
	t.Helper()
	c := DefaultConfig()
	c.LogConfig.Mixed.KubernetesTemplateURI = "https://k8s/{{ .namespace }}/{{ .podName }}"
	mut(&c)
	p, err := NewWith(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func logsContext(t *testing.T) plugin.TaskContext {
	t.Helper()
	tmpl := &core.TaskTemplate{Type: "spark", Metadata: &core.TaskMetadata{LogLinks: []*core.TaskLog{{Name: "Notebook", Uri: "https://nb/{{ .podName }}"}}}}
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	ta := &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Name: "etl", Namespace: "ns"},
		Spec: flytev1.TaskActionSpec{RunName: "r1", Project: "p", Domain: "d", ActionName: "a1"}}
	return plugin.TaskContext{TaskAction: ta, Task: &task.Task{Form: task.FormFlyte, Raw: b, ID: task.Identifier{Name: "wf.etl", Version: "v1"}}, Attempt: 1}
}

// TestLinks: Flyte's log links of an application, in Flyte's order: the
// task's own links (once, rendered for the driver), the driver's (mixed)
// once the operator named its pod, the user logs', the system logs' and all
// user logs' (the application's name as the pod, shown while pending too);
// then the driver's UI while running (https:// added when the operator left
// the scheme out), the history server's once it ended with an application
// ID. The IDE link (the driver's _F_E_VS) gives Flyte's reasons. A
// placeholder without a value (the driver's name before the operator set
// it) is left as written, as Flyte does.
func TestLinks(t *testing.T) {
	all := func(c *Config) {
		c.SparkHistoryServerURL = "https://history"
		c.LogConfig.User = config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "User", TemplateURIs: []string{"https://user/{{ .podName }}"}}}}
		c.LogConfig.System = config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "System", TemplateURIs: []string{"https://system/{{ .podName }}"}}}}
		c.LogConfig.AllUser = config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "All", TemplateURIs: []string{"https://all/{{ .podName }}/{{ .taskRetryAttempt }}"}}}}
		c.LogConfig.Mixed.DynamicLogLinks = map[string]config.TaskLogTemplate{"vscode": {DisplayName: "VS Code", TemplateURIs: []string{"https://vs/{{ .podName }}"}}}
	}
	driver := func(a *sparkv1beta2.SparkApplication) { a.Status.DriverInfo.PodName = "etl-0-driver" }
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		app  *sparkv1beta2.SparkApplication
		want string
		msg  string
	}{
		{"defaults, not submitted", func(*Config) {}, app(sparkv1beta2.ApplicationStateNew), "Notebook=https://nb/{{ .podName }}", "job queued"},
		{"defaults, the driver named", func(*Config) {}, app(sparkv1beta2.ApplicationStateSubmitted, driver),
			"Notebook=https://nb/etl-0-driver\nKubernetes Logs=https://k8s/ns/etl-0-driver", "job submitted"},
		{"all, queued", all, app(sparkv1beta2.ApplicationStateNew),
			"Notebook=https://nb/{{ .podName }}\nUser=https://user/{{ .podName }}\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)", "job queued"},
		{"all, running with the UI", all, app(sparkv1beta2.ApplicationStateRunning, driver, func(a *sparkv1beta2.SparkApplication) {
			a.Status.DriverInfo.WebUIIngressAddress = "spark.example.com/etl"
		}), "Notebook=https://nb/etl-0-driver\nKubernetes Logs=https://k8s/ns/etl-0-driver\nUser=https://user/etl-0-driver\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)\nSpark Driver UI=https://spark.example.com/etl", "job running"},
		{"all, the UI's own scheme", all, app(sparkv1beta2.ApplicationStateRunning, func(a *sparkv1beta2.SparkApplication) {
			a.Status.DriverInfo.WebUIIngressAddress = "http://spark/etl"
		}), "Notebook=https://nb/{{ .podName }}\nUser=https://user/{{ .podName }}\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)\nSpark Driver UI=http://spark/etl", "job running"},
		{"all, completed", all, app(sparkv1beta2.ApplicationStateCompleted, driver, func(a *sparkv1beta2.SparkApplication) {
			a.Status.SparkApplicationID = "spark-123"
		}), "Notebook=https://nb/etl-0-driver\nKubernetes Logs=https://k8s/ns/etl-0-driver\nUser=https://user/etl-0-driver\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)\nSpark History UI=https://history/history/spark-123", ""},
		{"all, failed without an application ID", all, app(sparkv1beta2.ApplicationStateFailed), "Notebook=https://nb/{{ .podName }}\nUser=https://user/{{ .podName }}\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)", "Spark Job Failed"},
		{"the IDE, queued", all, app(sparkv1beta2.ApplicationStateSubmitted, driver, func(a *sparkv1beta2.SparkApplication) {
			a.Spec.Driver.Env = []corev1.EnvVar{{Name: "_F_E_VS", Value: "true"}}
		}), "Notebook=https://nb/etl-0-driver\nKubernetes Logs=https://k8s/ns/etl-0-driver\nVS Code=https://vs/etl-0-driver\nUser=https://user/etl-0-driver\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)", "Vscode server is not ready"},
		{"the IDE, running", all, app(sparkv1beta2.ApplicationStateRunning, driver, func(a *sparkv1beta2.SparkApplication) {
			a.Spec.Driver.Env = []corev1.EnvVar{{Name: "_F_E_VS", Value: "1"}}
		}), "Notebook=https://nb/etl-0-driver\nKubernetes Logs=https://k8s/ns/etl-0-driver\nVS Code=https://vs/etl-0-driver\nUser=https://user/etl-0-driver\nSystem=https://system/etl-0\nAll=https://all/etl-0/0 (pending too)", "Vscode server is ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := logsPlugin(t, tc.mut).observe(tc.app, logsContext(t))
			if got := linkNames(obs.Logs); got != tc.want {
				t.Errorf("links:\n%s\nwant:\n%s", got, tc.want)
			}
			if !strings.Contains(obs.Message, tc.msg) {
				t.Errorf("message %q; want it to contain %q", obs.Message, tc.msg)
			}
		})
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := (&Plugin{}).AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestObserve: the attempt's application read by name; missing, or not
// controlled by this TaskAction (by UID), is not started.
func TestObserve(t *testing.T) {
	ta := typedTaskAction(`{"mainClass": "a"}`)
	p, err := NewWith(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tc := plugin.TaskContext{TaskAction: ta, Attempt: 1}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	if obs, err := p.Observe(context.Background(), c, tc); err != nil || obs.Phase != plugin.PhaseNotStarted {
		t.Fatalf("nothing there: %+v, %v", obs, err)
	}
	if err := p.Launch(context.Background(), c, tc); err != nil {
		t.Fatal(err)
	}
	if err := p.Launch(context.Background(), c, tc); err != nil {
		t.Fatalf("a second launch of the same attempt: %v", err)
	}
	if obs, err := p.Observe(context.Background(), c, tc); err != nil || obs.Phase != plugin.PhaseQueued {
		t.Fatalf("launched: %+v, %v", obs, err)
	}
	other := ta.DeepCopy()
	other.UID = "u2"
	if obs, err := p.Observe(context.Background(), c, plugin.TaskContext{TaskAction: other, Attempt: 1}); err != nil || obs.Phase != plugin.PhaseNotStarted {
		t.Fatalf("another TaskAction of the same name: %+v, %v", obs, err)
	}
	if err := p.Launch(context.Background(), c, plugin.TaskContext{TaskAction: other, Attempt: 1}); err == nil {
		t.Fatal("another TaskAction of the same name launched over an application it does not control")
	}
}

// TestPluginBasics: identity, the kind it watches and what it requires.
func TestPluginBasics(t *testing.T) {
	p, err := New(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	ta := typedTaskAction(`{"mainClass": "a"}`)
	switch {
	case p.ID() != "spark" || strings.Join(p.TaskTypes(), ",") != "spark":
		t.Errorf("id %s, task types %v", p.ID(), p.TaskTypes())
	case p.ResourceName(plugin.TaskContext{TaskAction: ta, Attempt: 3}) != "etl-2":
		t.Errorf("resource name %s", p.ResourceName(plugin.TaskContext{TaskAction: ta, Attempt: 3}))
	case !strings.Contains(p.Requires(), "sparkapplications.sparkoperator.k8s.io"):
		t.Errorf("requires %q", p.Requires())
	}
	if _, ok := p.WatchedTypes()[0].(*sparkv1beta2.SparkApplication); !ok {
		t.Errorf("watched %T", p.WatchedTypes()[0])
	}
	if err := p.Validate(plugin.TaskContext{TaskAction: typedTaskAction(`{}`), Attempt: 1}); err == nil {
		t.Error("a job without a main validated")
	}
	if err := p.Validate(plugin.TaskContext{TaskAction: ta, Attempt: 1}); err != nil {
		t.Errorf("validate: %v", err)
	}
}
