// Package clustered is the plugin of Flyte's clustered-task task type:
// multi-node training, each attempt a JobSet (sigs.k8s.io/jobset) of one
// Indexed Job whose pods are the nodes, each running the task's container
// with torchrun's environment. The JobSet is built from the task's template
// by the rules of Flyte's clustered plugin (Build), its status read as
// Flyte reads it (ObserveJobSet); the differences are listed in
// docs/engines/clustered.md.
package clustered

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
)

// ID is the plugin's identifier and task type, Flyte's.
const ID = "clustered-task"

// TaskTypes are the task types the plugin serves.
var TaskTypes = []string{ID}

// Requirement names what the cluster must serve for a clustered task.
const Requirement = "JobSet's CRDs (jobsets.jobset.x-k8s.io) and its controller, sigs.k8s.io/jobset"

// The executor creates JobSets and deletes those of ended attempts; the
// JobSet controller creates the Jobs, the Service and the pods.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;delete

// Plugin runs clustered tasks as JobSets.
type Plugin struct{}

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.Requirer      = (*Plugin)(nil)
	_ plugin.SchemeBuilder = (*Plugin)(nil)
	_ plugin.Validator     = (*Plugin)(nil)
)

// New returns the plugin. Flyte's clustered plugin has no configuration
// section of its own (its links are those of plugins.logs), and neither has
// this one: cfg is taken for the shape every engine plugin's constructor has.
func New(config.Config) (*Plugin, error) { return &Plugin{}, nil }

// ID implements plugin.Plugin.
func (*Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (*Plugin) TaskTypes() []string { return append([]string(nil), TaskTypes...) }

// Requires implements plugin.Requirer.
func (*Plugin) Requires() string { return Requirement }

// AddToScheme registers JobSet's API types (plugin.SchemeBuilder).
func (*Plugin) AddToScheme(s *runtime.Scheme) error { return jobsetv1alpha2.AddToScheme(s) }

// ResourceName is the attempt's JobSet (JobSetName).
func (*Plugin) ResourceName(tc plugin.TaskContext) string {
	return JobSetName(tc.TaskAction.Name, tc.Attempt)
}

var jobSetType = &jobsetv1alpha2.JobSet{}

// WatchedTypes implements plugin.Plugin.
func (*Plugin) WatchedTypes() []client.Object { return []client.Object{jobSetType} }

func (*Plugin) build(tc plugin.TaskContext) (*jobsetv1alpha2.JobSet, error) {
	if tc.Task == nil {
		return nil, fmt.Errorf("no task in the task context")
	}
	spec, err := TaskSpec(tc.Task)
	if err != nil {
		return nil, err
	}
	return Build(tc, spec)
}

// Validate builds the attempt's JobSet without creating it (plugin.Validator).
func (p *Plugin) Validate(tc plugin.TaskContext) error {
	_, err := p.build(tc)
	return err
}

// Launch creates the attempt's JobSet; one of ours that exists is success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	js, err := p.build(tc)
	if err != nil {
		return err
	}
	return plugin.Create(ctx, c, js, tc.TaskAction)
}

// Observe reads the attempt's JobSet from r and maps its status; a missing
// JobSet, or one that is not ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	js := &jobsetv1alpha2.JobSet{}
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), "jobset", js); !started || err != nil {
		return obs, err
	}
	obs := ObserveJobSet(js, tc.TaskAction, tc.Attempt)
	var ended time.Time
	if obs.Phase.IsTerminal() {
		ended = obs.OccurredAt
	}
	links, err := JobSetLogs(tc.Settings.TaskLogs, tc, js, ended)
	if err != nil {
		// A link that cannot be rendered is left out; the attempt goes on.
		log.FromContext(ctx).Info("could not render the JobSet's log links", "jobset", js.Name, "error", err.Error())
	}
	obs.Logs = links
	return obs, nil
}

// Finalize has nothing to release: the JobSets go with their TaskAction.
func (*Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }
