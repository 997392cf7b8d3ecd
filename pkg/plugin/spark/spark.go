// Package spark is the plugin of Flyte's spark task type: an attempt is a
// SparkApplication of the Kubeflow Spark operator
// (github.com/kubeflow/spark-operator, sparkoperator.k8s.io/v1beta2), built
// from the task template as Flyte's Spark plugin builds it, its driver and
// executors from the task's pod as the container plugin builds it. Building
// and reading the application are pure functions; the plugin's methods only
// make the API calls around them.
package spark

import (
	"context"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
)

// ID is the plugin's identifier and its task type, Flyte's.
const ID = "spark"

// TaskTypes are the task types the plugin serves.
var TaskTypes = []string{ID}

// The executor creates, reads and deletes SparkApplications.
// +kubebuilder:rbac:groups=sparkoperator.k8s.io,resources=sparkapplications,verbs=get;list;watch;create;delete

// Plugin runs Spark tasks as SparkApplications.
type Plugin struct {
	cfg  Config
	logs renderers
}

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.Requirer      = (*Plugin)(nil)
	_ plugin.SchemeBuilder = (*Plugin)(nil)
	_ plugin.Validator     = (*Plugin)(nil)
)

// New returns the Spark plugin configured by cfg's `plugins: spark:`
// section (Flyte's defaults where it says nothing).
func New(cfg config.Config) (*Plugin, error) {
	c, err := LoadConfig(cfg)
	if err != nil {
		return nil, err
	}
	return NewWith(c)
}

// NewWith returns the Spark plugin with c as its section.
func NewWith(c Config) (*Plugin, error) {
	logs, err := newRenderers(c.LogConfig)
	if err != nil {
		return nil, err
	}
	return &Plugin{cfg: c, logs: logs}, nil
}

// ID implements plugin.Plugin.
func (*Plugin) ID() string { return ID }

// TaskTypes implements plugin.Plugin.
func (*Plugin) TaskTypes() []string { return append([]string(nil), TaskTypes...) }

// Requires names what must be installed: the operator's CRD.
func (*Plugin) Requires() string {
	return "the Kubeflow Spark operator's CRDs (sparkapplications.sparkoperator.k8s.io, v1beta2), github.com/kubeflow/spark-operator v2"
}

// AddToScheme registers the operator's API types.
func (*Plugin) AddToScheme(s *runtime.Scheme) error { return sparkv1beta2.AddToScheme(s) }

// ResourceName is the attempt's SparkApplication, named as its pod would be
// (Flyte names it so too).
func (*Plugin) ResourceName(tc plugin.TaskContext) string {
	return container.PodName(tc.TaskAction.Name, tc.Attempt)
}

var sparkApplicationType = &sparkv1beta2.SparkApplication{}

// WatchedTypes implements plugin.Plugin.
func (*Plugin) WatchedTypes() []client.Object { return []client.Object{sparkApplicationType} }

// Validate builds the attempt's SparkApplication without creating it.
func (p *Plugin) Validate(tc plugin.TaskContext) error {
	_, err := p.Build(tc)
	return err
}

// Build is the attempt's SparkApplication, its driver's start time the
// reconcile's clock.
func (p *Plugin) Build(tc plugin.TaskContext) (*sparkv1beta2.SparkApplication, error) {
	now := tc.Now
	if now.IsZero() {
		now = time.Now()
	}
	return Build(tc, p.cfg, now)
}

// Launch creates the attempt's SparkApplication. An existing one of ours is
// success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	app, err := p.Build(tc)
	if err != nil {
		return err
	}
	return plugin.Create(ctx, c, app, tc.TaskAction)
}

// Observe reads the attempt's SparkApplication from r. A missing one, or one
// that is not ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	app := &sparkv1beta2.SparkApplication{}
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), "sparkapplication", app); !started || err != nil {
		return obs, err
	}
	return p.observe(app, tc), nil
}

// Finalize has nothing to release: the applications go with their TaskAction.
func (*Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }
