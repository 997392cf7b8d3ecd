// Package dask is the plugin of Flyte's dask task type: each attempt is a
// DaskJob of the Dask operator (dask-kubernetes), whose job runner pod runs
// the task against a Dask cluster (a scheduler and a group of workers) the
// operator creates for it and removes when the runner ends. The DaskJob is
// built from the task's template by the rules of Flyte's dask plugin
// (Build), its status read as Flyte reads it (ObserveJob); the differences
// are listed in docs/engines/dask.md.
package dask

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/tasklog"
)

// ID is the plugin's identifier and task type, Flyte's.
const ID = "dask"

// TaskTypes are the task types the plugin serves.
var TaskTypes = []string{ID}

// Requirement names what the cluster must serve for a Dask task.
const Requirement = "the Dask operator's CRDs (daskjobs.kubernetes.dask.org), github.com/dask/dask-kubernetes"

// The executor creates DaskJobs and deletes those of ended attempts; the
// operator creates the cluster and the pods.
// +kubebuilder:rbac:groups=kubernetes.dask.org,resources=daskjobs,verbs=get;list;watch;create;delete

// Plugin runs Dask tasks as DaskJobs.
type Plugin struct {
	logs *tasklog.Renderer
}

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.Requirer      = (*Plugin)(nil)
	_ plugin.SchemeBuilder = (*Plugin)(nil)
	_ plugin.Validator     = (*Plugin)(nil)
)

// New returns the plugin configured by cfg's `plugins: dask:` section, with
// Flyte's defaults for what it leaves out.
func New(cfg config.Config) (*Plugin, error) {
	_, logs, err := LoadConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Plugin{logs: logs}, nil
}

// ID implements plugin.Plugin.
func (*Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (*Plugin) TaskTypes() []string { return append([]string(nil), TaskTypes...) }

// Requires implements plugin.Requirer.
func (*Plugin) Requires() string { return Requirement }

// AddToScheme registers the operator's API types (plugin.SchemeBuilder).
func (*Plugin) AddToScheme(s *runtime.Scheme) error { return daskv1.AddToScheme(s) }

// ResourceName is the attempt's DaskJob (JobName).
func (*Plugin) ResourceName(tc plugin.TaskContext) string {
	return JobName(tc.TaskAction.Name, tc.Attempt)
}

var jobType = &daskv1.DaskJob{}

// WatchedTypes implements plugin.Plugin.
func (*Plugin) WatchedTypes() []client.Object { return []client.Object{jobType} }

// build is the attempt's DaskJob.
func (p *Plugin) build(tc plugin.TaskContext) (*daskv1.DaskJob, error) {
	if tc.Task == nil {
		return nil, fmt.Errorf("no task in the task context")
	}
	spec, err := JobSpec(tc.Task)
	if err != nil {
		return nil, err
	}
	prefix, err := DashboardPrefix(p.logs, tc)
	if err != nil {
		return nil, err
	}
	return Build(tc, spec, prefix)
}

// Validate builds the attempt's DaskJob without creating it (plugin.Validator).
func (p *Plugin) Validate(tc plugin.TaskContext) error {
	_, err := p.build(tc)
	return err
}

// Launch creates the attempt's DaskJob; one of ours that exists is success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	job, err := p.build(tc)
	if err != nil {
		return err
	}
	return plugin.Create(ctx, c, job, tc.TaskAction)
}

// Observe reads the attempt's DaskJob from r and maps its status; a missing
// DaskJob, or one that is not ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	job := &daskv1.DaskJob{}
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), "daskjob", job); !started || err != nil {
		return obs, err
	}
	obs := ObserveJob(job)
	links, err := JobLogs(p.logs, tc, job, obs.Phase)
	if err != nil {
		// A link that cannot be rendered is left out; the attempt goes on.
		log.FromContext(ctx).Info("could not render the Dask job's log links", "daskjob", job.Name, "error", err.Error())
	}
	obs.Logs = links
	return obs, nil
}

// Finalize has nothing to release: the DaskJobs go with their TaskAction.
func (*Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }
