package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/plugin/sleep"
	"github.com/taskaction/executor/pkg/setup"
)

// widgetGVK is an engine's kind that envtest does not serve until a test
// installs its CRD.
var widgetGVK = schema.GroupVersionKind{Group: "engines.test.flyte.org", Version: "v1", Kind: "Widget"}

// widgetPlugin runs task type "widget" as a Widget, whose status.state an
// operator (the test) sets.
type widgetPlugin struct{}

func (widgetPlugin) ID() string          { return "widget" }
func (widgetPlugin) TaskTypes() []string { return []string{"widget"} }
func (widgetPlugin) Requires() string {
	return "the Widget operator's CRD (widgets.engines.test.flyte.org)"
}
func (widgetPlugin) ResourceName(tc plugin.TaskContext) string {
	return container.PodName(tc.TaskAction.Name, tc.Attempt)
}
func (widgetPlugin) WatchedTypes() []client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	return []client.Object{u}
}
func (p widgetPlugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	u := p.WatchedTypes()[0].(*unstructured.Unstructured)
	u.SetName(p.ResourceName(tc))
	u.SetNamespace(tc.TaskAction.Namespace)
	u.SetLabels(map[string]string{plugin.LabelManaged: "true"})
	u.SetOwnerReferences([]metav1.OwnerReference{plugin.ControllerRef(tc.TaskAction)})
	return plugin.Create(ctx, c, u, tc.TaskAction)
}
func (p widgetPlugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	u := plugin.NewObject(p.WatchedTypes()[0])
	if err := r.Get(ctx, client.ObjectKey{Namespace: tc.TaskAction.Namespace, Name: p.ResourceName(tc)}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return plugin.Observation{Phase: plugin.PhaseNotStarted}, nil
		}
		return plugin.Observation{}, err
	}
	state, _, _ := unstructured.NestedString(u.(*unstructured.Unstructured).Object, "status", "state")
	switch state {
	case "Succeeded":
		return plugin.Observation{Phase: plugin.PhaseSucceeded, Finished: true}, nil
	case "Running":
		return plugin.Observation{Phase: plugin.PhaseRunning}, nil
	}
	return plugin.Observation{Phase: plugin.PhaseQueued}, nil
}
func (widgetPlugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: widgetGVK.Kind, ListKind: widgetGVK.Kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: widgetGVK.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

// startManagerWith runs the executor as startManager does, with reg as its plugins.
func startManagerWith(t *testing.T, reg *plugin.Registry) {
	t.Helper()
	stopManager()
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.wrap)
	mgr, err := setup.Setup(testConfig(), cfg, setup.Options{Recorder: recorder, Registry: reg, SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgrStop = cancel
	mgrDone = make(chan struct{})
	go func() {
		defer close(mgrDone)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() {
		stopManager()
		if err := startManager(testConfig()); err != nil {
			t.Error(err)
		}
	})
}

func widgetTaskAction(ns, name string) *flytev1.TaskAction {
	ta := validTaskAction(ns, name)
	ta.Spec.TaskType = "widget"
	return ta
}

// TestEngineNotInstalled is issue 32's "missing CRD": a task whose engine
// the cluster does not serve fails at once, naming the missing kind and what
// to install, while pod tasks run on; once the CRD is installed, the next
// such task runs, with no restart (its kind is watched from then on).
func TestEngineNotInstalled(t *testing.T) {
	reg := plugin.NewRegistry()
	c := container.New()
	for _, p := range []plugin.Plugin{c, widgetPlugin{}} {
		if err := reg.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	reg.SetDefault(c)
	startManagerWith(t, reg)
	ns := namespace(t)

	create(t, widgetTaskAction(ns, "early"))
	got := waitReason(t, ns, "early", flytev1.ConditionFailed, flytev1.ReasonPluginNotFound)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodePluginNotFound ||
		!strings.Contains(es.Message, "Widget of engines.test.flyte.org/v1") || !strings.Contains(es.Message, "widgets.engines.test.flyte.org") {
		t.Errorf("errorState = %+v; want the missing kind and its CRD named", es)
	}
	create(t, validTaskAction(ns, "pods-go-on"))
	waitPod(t, ns, "pods-go-on-0")

	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}}); err != nil {
		t.Fatal(err)
	}
	create(t, widgetTaskAction(ns, "later"))
	w := plugin.NewObject(widgetPlugin{}.WatchedTypes()[0]).(*unstructured.Unstructured)
	eventually(t, 30*time.Second, "the Widget of the task created after the CRD", func() bool {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "later-0"}, w) == nil
	})
	if ref := metav1.GetControllerOf(w); ref == nil || ref.Kind != "TaskAction" || ref.Name != "later" {
		t.Fatalf("the Widget's controller = %+v", ref)
	}
	for _, state := range []string{"Running", "Succeeded"} {
		if err := unstructured.SetNestedField(w.Object, state, "status", "state"); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Update(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		if state == "Running" {
			waitReason(t, ns, "later", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
		}
	}
	waitReason(t, ns, "later", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if p := phasesOf(eventsOf(ns, "later")); p != "1:QUEUED 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events = %s", p)
	}
}

// TestSleepTask: the sleep plugin's attempt is a ConfigMap the TaskAction
// controls; the task runs for its duration (spec.template.config.duration),
// with no pod, and succeeds.
func TestSleepTask(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "nap")
	ta.Spec.TaskType = "sleep"
	ta.Spec.Template.Config = map[string]string{sleep.ConfigKey: "2s"}
	create(t, ta)
	waitReason(t, ns, "nap", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	got := waitReason(t, ns, "nap", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if n := len(pods(t, ns)); n != 0 {
		t.Errorf("a sleep ran %d pods", n)
	}
	if h := got.Status.PhaseHistory; len(h) < 2 || h[len(h)-1].OccurredAt.Sub(h[0].OccurredAt.Time) < time.Second {
		t.Errorf("history %+v: want it to end at least the sleep's duration (rounded to seconds) after it began", h)
	}
	if p := phasesOf(eventsOf(ns, "nap")); !strings.HasSuffix(p, "1:RUNNING 1:SUCCEEDED") {
		t.Errorf("events = %s", p)
	}
}
