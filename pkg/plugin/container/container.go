// Package container is the built-in plugin that runs a task's container as
// one pod per attempt. Decisions (the pod to build, what a pod's status
// means, what a create error means) are pure functions; the plugin methods
// only do the API calls around them.
package container

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskaction/executor/pkg/plugin"
)

// ID is the plugin's identifier.
const ID = "container"

// TaskTypes are the task types the plugin serves.
var TaskTypes = []string{"container", "python", "python-task", "raw-container", "sidecar"}

// Plugin runs container tasks as pods.
type Plugin struct {
	// Now is the clock of the grace periods; time.Now when nil.
	Now func() time.Time
}

var _ plugin.Plugin = (*Plugin)(nil)

// New returns the container plugin.
func New() *Plugin { return &Plugin{} }

// ID implements plugin.Plugin.
func (p *Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (p *Plugin) TaskTypes() []string { return append([]string(nil), TaskTypes...) }

// ResourceName is the attempt's pod name.
func (p *Plugin) ResourceName(tc plugin.TaskContext) string {
	return PodName(tc.TaskAction.Name, tc.Attempt)
}

// WatchedTypes implements plugin.Plugin.
func (p *Plugin) WatchedTypes() []client.Object { return []client.Object{podType} }

// podType names the type only; it is never filled (the reconciler asks for
// the types on every read).
var podType = &corev1.Pod{}

// Validate builds the attempt's pod without creating it (plugin.Validator).
func (p *Plugin) Validate(tc plugin.TaskContext) error {
	_, err := BuildPod(tc)
	return err
}

// Launch creates the attempt's pod. An existing pod of ours is success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	pod, err := BuildPod(tc)
	if err != nil {
		return err
	}
	return plugin.Create(ctx, c, pod, tc.TaskAction)
}

// Observe reads the attempt's pod from r. A missing pod, or one that is not
// ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	pod := &corev1.Pod{}
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), "pod", pod); !started || err != nil {
		return obs, err
	}
	now := tc.Now
	if now.IsZero() {
		now = p.now()
	}
	return ObservePod(pod, now, tc.Settings), nil
}

// Finalize has nothing to release: the pods go with their TaskAction.
func (p *Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }

func (p *Plugin) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
