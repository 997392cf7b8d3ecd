// Package ray is the plugin of Flyte's "ray" task type: each attempt is a
// KubeRay RayJob (ray.io/v1), whose operator creates the Ray cluster (a head
// pod and worker groups built from the task's pod), submits the task's
// command as the Ray job and reports its end. Building the RayJob and reading
// its status are pure functions (Build, ObserveJob, Links); the plugin
// methods only do the API calls around them.
package ray

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/tasklog"
)

// ID is the plugin's identifier and task type, Flyte's.
const ID = "ray"

// KubeRay's kind and the controller-runtime RBAC the executor needs for it.
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch;create;delete

// Plugin runs Ray tasks as RayJobs.
type Plugin struct {
	cfg Config
	// logs renders the head pod's links when plugins.ray.logs is set (else
	// the executor's plugins.logs, Settings.TaskLogs); dashboard the Ray
	// dashboard's link (nil: none).
	logs, dashboard *tasklog.Renderer
}

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.Requirer      = (*Plugin)(nil)
	_ plugin.SchemeBuilder = (*Plugin)(nil)
	_ plugin.Validator     = (*Plugin)(nil)
)

// New returns the plugin configured by cfg's plugins.ray section (Flyte's
// keys and defaults); a section that is not valid is an error. (Every
// engine's New has these two steps, over its own Config type: nothing to
// share but the shape.)
func New(cfg config.Config) (*Plugin, error) {
	c, err := LoadConfig(cfg)
	if err != nil {
		return nil, err
	}
	return NewWithConfig(c)
}

// NewWithConfig returns the plugin with a configuration already read.
func NewWithConfig(c Config) (*Plugin, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	logs, dashboard, err := c.renderers()
	if err != nil {
		return nil, err
	}
	return &Plugin{cfg: c, logs: logs, dashboard: dashboard}, nil
}

// Config is the plugin's configuration.
func (p *Plugin) Config() Config { return p.cfg }

// ID implements plugin.Plugin.
func (*Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (*Plugin) TaskTypes() []string { return []string{ID} }

// Requires implements plugin.Requirer.
func (*Plugin) Requires() string {
	return "KubeRay's CRDs (rayjobs.ray.io, rayclusters.ray.io) and its operator, github.com/ray-project/kuberay (v1.6)"
}

// AddToScheme registers KubeRay's types (plugin.SchemeBuilder).
func (*Plugin) AddToScheme(s *runtime.Scheme) error { return rayv1.AddToScheme(s) }

var rayJobType = &rayv1.RayJob{}

// WatchedTypes implements plugin.Plugin.
func (*Plugin) WatchedTypes() []client.Object { return []client.Object{rayJobType} }

// ResourceName is the attempt's RayJob (JobName).
func (*Plugin) ResourceName(tc plugin.TaskContext) string {
	return JobName(tc.TaskAction.Name, tc.Attempt)
}

// Validate builds the attempt's RayJob without creating it (plugin.Validator).
func (p *Plugin) Validate(tc plugin.TaskContext) error {
	_, err := Build(tc, p.cfg)
	return err
}

// Launch creates the attempt's RayJob; one of ours already there is success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	job, err := Build(tc, p.cfg)
	if err != nil {
		return err
	}
	return plugin.Create(ctx, c, job, tc.TaskAction)
}

// Observe reads the attempt's RayJob from r; a missing one, or one that is
// not ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	job := &rayv1.RayJob{}
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), "rayjob", job); !started || err != nil {
		return obs, err
	}
	obs := ObserveJob(job)
	logs := p.logs
	if logs == nil {
		logs = tc.Settings.TaskLogs
	}
	// A link that cannot be rendered is left out; the attempt goes on.
	obs.Logs, _ = Links(job, tc, logs, p.dashboard)
	return obs, nil
}

// Finalize has nothing to release: the RayJobs go with their TaskAction.
func (*Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }

// Links are the attempt's log links: those of logs for the Ray head pod
// once KubeRay named the cluster, then, while the Ray job runs, the Ray
// dashboard's (dashboard, with {{ .rayClusterName }} and {{ .rayJobID }}).
// Worker pods get none: the RayJob does not name them.
func Links(job *rayv1.RayJob, tc plugin.TaskContext, logs, dashboard *tasklog.Renderer) ([]*core.TaskLog, error) {
	st := job.Status
	if st.RayClusterName == "" {
		return nil, nil
	}
	head := st.RayClusterStatus.Head.PodName
	if head == "" {
		// Flyte's name for it; KubeRay names the head pod so when its
		// deterministic head pod names are on.
		head = st.RayClusterName + "-head"
	}
	in := plugin.LogInput(tc, job.Namespace, job.Name)
	in.PodName, in.ContainerName = head, HeadContainerName
	in.Extra = map[string]string{"rayClusterName": st.RayClusterName, "rayJobID": st.JobId}
	if start := st.StartTime; start != nil {
		in.PodStart = start.Time
	}
	var out []*core.TaskLog
	if logs != nil {
		links, err := logs.Links(in)
		if err != nil {
			return nil, err
		}
		out = append(out, links...)
	}
	if dashboard != nil && st.DashboardURL != "" && st.JobStatus == rayv1.JobStatusRunning {
		// The task's own links and dynamic links came with the head's.
		in.TaskLinks, in.TaskConfig = nil, nil
		links, err := dashboard.Links(in)
		if err != nil {
			return out, err
		}
		out = append(out, links...)
	}
	return out, nil
}
