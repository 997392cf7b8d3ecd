// Package sleep is the plugin of Flyte's core-sleep task type: an attempt
// succeeds once its duration has passed, with no pod. Flyte's executor keeps
// the start in memory (a restart starts the wait again); here the attempt's
// start is a ConfigMap the TaskAction controls, created at launch with the
// duration in it, so the wait survives restarts and follows the same
// crash-safe path as any other object (stable name, owner checked by UID,
// deleted with a UID precondition).
package sleep

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
)

// ID is the plugin's identifier, Flyte's.
const ID = "core-sleep"

// TaskTypes: Flyte's task type, and a short one for typed TaskActions.
var TaskTypes = []string{ID, "sleep"}

// CodeBadTaskSpecification is Flyte's code for a sleep task without one
// duration input.
const CodeBadTaskSpecification = "BadTaskSpecification"

// durationKey holds the attempt's duration in its ConfigMap; ConfigKey the
// duration of a typed TaskAction (spec.template.config.duration).
const (
	durationKey = "duration"
	ConfigKey   = "duration"
)

// maxDuration bounds a sleep: beyond it, a value is a mistake.
const maxDuration = 7 * 24 * time.Hour

// Plugin runs sleep tasks.
type Plugin struct{}

var (
	_ plugin.Plugin     = (*Plugin)(nil)
	_ plugin.InputsUser = (*Plugin)(nil)
)

// New returns the sleep plugin.
func New() *Plugin { return &Plugin{} }

// ID implements plugin.Plugin.
func (*Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (*Plugin) TaskTypes() []string { return append([]string(nil), TaskTypes...) }

// ResourceName is the attempt's ConfigMap, named as its pod would be.
func (*Plugin) ResourceName(tc plugin.TaskContext) string {
	return container.PodName(tc.TaskAction.Name, tc.Attempt)
}

var configMapType = &corev1.ConfigMap{}

// WatchedTypes implements plugin.Plugin.
func (*Plugin) WatchedTypes() []client.Object { return []client.Object{configMapType} }

// UsesInputs: a Flyte-form sleep reads its duration from its one input.
func (*Plugin) UsesInputs(t *task.Task) bool { return t.Form == task.FormFlyte }

// Launch records the attempt's start and duration in its ConfigMap.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	d, err := Duration(tc.Task, tc.Inputs)
	if err != nil {
		return &plugin.LaunchError{Err: plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindUser, Message: err.Error()}}
	}
	ta := tc.TaskAction
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.ResourceName(tc), Namespace: ta.Namespace,
			Labels:          map[string]string{plugin.LabelManaged: "true", container.LabelAttempt: fmt.Sprint(tc.Attempt)},
			OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(ta)},
		},
		Data: map[string]string{durationKey: d.String()},
	}
	return plugin.Create(ctx, c, cm, ta)
}

// Observe: running until the duration has passed since the ConfigMap's
// creation, then succeeded as of that moment.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	cm := &corev1.ConfigMap{}
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), "configmap", cm); !started || err != nil {
		return obs, err
	}
	return observe(cm, tc.Now), nil
}

func observe(cm *corev1.ConfigMap, now time.Time) plugin.Observation {
	if now.IsZero() {
		now = time.Now()
	}
	start := cm.CreationTimestamp.Time
	obs := plugin.Observation{Deleting: cm.DeletionTimestamp != nil}
	d, err := time.ParseDuration(cm.Data[durationKey])
	if err != nil || d < 0 || d > maxDuration {
		// Ours, and written by Launch: changed since by someone else.
		obs.Phase = plugin.PhasePermanentFailure
		obs.Error = &plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("the sleep's ConfigMap %s holds no valid duration (%q)", cm.Name, cm.Data[durationKey])}
		return obs
	}
	end := start.Add(d)
	if now.Before(end) {
		obs.Phase, obs.OccurredAt, obs.RecheckAfter = plugin.PhaseRunning, start, end.Sub(now)
		obs.Message = fmt.Sprintf("sleeping %v", d)
		return obs
	}
	obs.Phase, obs.OccurredAt, obs.Finished = plugin.PhaseSucceeded, end, true
	return obs
}

// Finalize has nothing to release: the ConfigMaps go with their TaskAction.
func (*Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }

// Duration is how long the task sleeps: Flyte's form takes it from its one
// input, typed as a duration (the template's interface declares exactly one
// input, of that type, and no output); the typed form from
// spec.template.config.duration (Go syntax).
func Duration(t *task.Task, inputs *core.LiteralMap) (time.Duration, error) {
	if t.Form != task.FormFlyte {
		s, ok := t.Config[ConfigKey]
		if !ok {
			return 0, fmt.Errorf("spec.template.config.%s is required: how long the task sleeps, e.g. 30s", ConfigKey)
		}
		return bounded(time.ParseDuration(s))
	}
	var iface core.TypedInterface
	if err := proto.Unmarshal(t.Interface, &iface); err != nil {
		return 0, fmt.Errorf("the task's interface cannot be read: %v", err)
	}
	vars := iface.GetInputs().GetVariables()
	if len(vars) != 1 {
		return 0, fmt.Errorf("task type %s requires exactly one duration input, the template declares %d", ID, len(vars))
	}
	if len(iface.GetOutputs().GetVariables()) != 0 {
		return 0, fmt.Errorf("task type %s has no outputs, the template declares %d", ID, len(iface.GetOutputs().GetVariables()))
	}
	name := vars[0].GetKey()
	if vars[0].GetValue().GetType().GetSimple() != core.SimpleType_DURATION {
		return 0, fmt.Errorf("input %s must be typed as a duration", name)
	}
	lit, ok := inputs.GetLiterals()[name]
	if !ok {
		return 0, fmt.Errorf("duration input %s is missing from the inputs", name)
	}
	v := lit.GetScalar().GetPrimitive().GetDuration()
	if v == nil {
		return 0, fmt.Errorf("duration input %s must be a duration literal", name)
	}
	if err := v.CheckValid(); err != nil {
		return 0, fmt.Errorf("duration input %s: %v", name, err)
	}
	return bounded(v.AsDuration(), nil)
}

func bounded(d time.Duration, err error) (time.Duration, error) {
	switch {
	case err != nil:
		return 0, err
	case d < 0:
		return 0, fmt.Errorf("the duration must not be negative, got %v", d)
	case d > maxDuration:
		return 0, fmt.Errorf("the duration must be at most %v, got %v", maxDuration, d)
	}
	return d, nil
}
