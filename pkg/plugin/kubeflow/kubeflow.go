// Package kubeflow runs Flyte's distributed training task types on the
// Kubeflow training operator (github.com/kubeflow/training-operator, API
// kubeflow.org/v1): a pytorch task as a PyTorchJob (elastic or with a
// master), a tensorflow task as a TFJob, an mpi task as an MPIJob. The three
// plugins share everything but the job they build: each replica group's pod
// template is the task's pod as the container plugin builds it, changed as
// the group's spec says, and the job's conditions map to the attempt's phase
// as in Flyte's plugins. The building and the status mapping are pure
// functions; the plugin methods only do the API calls around them.
package kubeflow

import (
	"context"
	"fmt"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// The task types, which are also the plugins' IDs (Flyte's).
const (
	PyTorch    = "pytorch"
	TensorFlow = "tensorflow"
	MPI        = "mpi"
)

// operator names what a task of these types needs installed.
const operator = "the Kubeflow training operator (github.com/kubeflow/training-operator, v1.9) with its CRD "

// jobKind is what sets one plugin apart from the others: the job it builds
// and how its replica groups are read back.
type jobKind struct {
	id            string
	kind          string
	crd           string
	containerName string
	newObject     func() client.Object
	build         func(b builder) (client.Object, error)
	// read gives the job's state and its replica groups, in the order of
	// its log links.
	read func(obj client.Object) (kubeflowv1.JobStatus, []replicaCount)
}

var (
	pytorchKind = &jobKind{
		id: PyTorch, kind: kubeflowv1.PyTorchJobKind, crd: "pytorchjobs.kubeflow.org",
		containerName: kubeflowv1.PyTorchJobDefaultContainerName,
		newObject:     func() client.Object { return &kubeflowv1.PyTorchJob{} },
		build:         func(b builder) (client.Object, error) { return b.buildPyTorchJob() },
		read: func(obj client.Object) (kubeflowv1.JobStatus, []replicaCount) {
			j := obj.(*kubeflowv1.PyTorchJob)
			return j.Status, replicaCounts(j.Spec.PyTorchReplicaSpecs, kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker)
		},
	}
	tfKind = &jobKind{
		id: TensorFlow, kind: kubeflowv1.TFJobKind, crd: "tfjobs.kubeflow.org",
		containerName: kubeflowv1.TFJobDefaultContainerName,
		newObject:     func() client.Object { return &kubeflowv1.TFJob{} },
		build:         func(b builder) (client.Object, error) { return b.buildTFJob() },
		read: func(obj client.Object) (kubeflowv1.JobStatus, []replicaCount) {
			j := obj.(*kubeflowv1.TFJob)
			return j.Status, replicaCounts(j.Spec.TFReplicaSpecs, tfReplicaTypes...)
		},
	}
	mpiKind = &jobKind{
		id: MPI, kind: kubeflowv1.MPIJobKind, crd: "mpijobs.kubeflow.org",
		containerName: kubeflowv1.MPIJobDefaultContainerName,
		newObject:     func() client.Object { return &kubeflowv1.MPIJob{} },
		build:         func(b builder) (client.Object, error) { return b.buildMPIJob() },
		read: func(obj client.Object) (kubeflowv1.JobStatus, []replicaCount) {
			j := obj.(*kubeflowv1.MPIJob)
			return j.Status, replicaCounts(j.Spec.MPIReplicaSpecs, kubeflowv1.MPIJobReplicaTypeLauncher, kubeflowv1.MPIJobReplicaTypeWorker)
		},
	}
	kinds = map[string]*jobKind{PyTorch: pytorchKind, TensorFlow: tfKind, MPI: mpiKind}
)

// Plugin runs one of the task types as its job.
type Plugin struct {
	kind *jobKind
	cfg  Config
	// object stands for the watched type; it is never filled.
	object client.Object
}

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.Requirer      = (*Plugin)(nil)
	_ plugin.SchemeBuilder = (*Plugin)(nil)
	_ plugin.Validator     = (*Plugin)(nil)
)

// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs;tfjobs;mpijobs,verbs=get;list;watch;create;delete

// New returns the PyTorch, TensorFlow and MPI plugins, configured by cfg's
// `plugins: kf-operator:` section (Flyte's defaults where it says nothing).
func New(cfg config.Config) ([]plugin.Plugin, error) {
	c, err := LoadConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []plugin.Plugin
	for _, id := range []string{PyTorch, TensorFlow, MPI} {
		p, err := NewPlugin(id, c)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// NewPlugin returns the plugin of task type id (PyTorch, TensorFlow or MPI).
func NewPlugin(id string, c Config) (*Plugin, error) {
	k, ok := kinds[id]
	if !ok {
		return nil, fmt.Errorf("kubeflow: no plugin for task type %q", id)
	}
	return &Plugin{kind: k, cfg: c, object: k.newObject()}, nil
}

// ID implements plugin.Plugin.
func (p *Plugin) ID() string { return p.kind.id }

// TaskTypes implements plugin.Plugin.
func (p *Plugin) TaskTypes() []string { return []string{p.kind.id} }

// ResourceName is the attempt's job (JobName).
func (p *Plugin) ResourceName(tc plugin.TaskContext) string {
	return JobName(tc.TaskAction.Name, tc.Attempt)
}

// WatchedTypes implements plugin.Plugin.
func (p *Plugin) WatchedTypes() []client.Object { return []client.Object{p.object} }

// Requires implements plugin.Requirer.
func (p *Plugin) Requires() string { return operator + p.kind.crd }

// AddToScheme registers the operator's API types (plugin.SchemeBuilder).
func (p *Plugin) AddToScheme(s *runtime.Scheme) error { return kubeflowv1.AddToScheme(s) }

// Build is the attempt's job. A task that cannot become one gives a
// *plugin.LaunchError (BadTaskSpecification, permanent).
func (p *Plugin) Build(tc plugin.TaskContext) (client.Object, error) {
	if tc.TaskAction == nil {
		return nil, fmt.Errorf("no TaskAction in the task context")
	}
	if tc.Task == nil {
		t, err := task.FromTaskAction(tc.TaskAction)
		if err != nil {
			return nil, badSpec("%v", err)
		}
		tc.Task = t
	}
	tc.Attempt = max(tc.Attempt, 1)
	return p.kind.build(builder{tc: tc, name: p.ResourceName(tc)})
}

// Validate builds the attempt's job without creating it (plugin.Validator).
func (p *Plugin) Validate(tc plugin.TaskContext) error {
	_, err := p.Build(tc)
	return err
}

// Launch creates the attempt's job. An existing job of ours is success.
func (p *Plugin) Launch(ctx context.Context, c client.Client, tc plugin.TaskContext) error {
	obj, err := p.Build(tc)
	if err != nil {
		return err
	}
	return plugin.Create(ctx, c, obj, tc.TaskAction)
}

// Observe reads the attempt's job from r and maps its status. A missing job,
// or one that is not ours, is PhaseNotStarted.
func (p *Plugin) Observe(ctx context.Context, r client.Reader, tc plugin.TaskContext) (plugin.Observation, error) {
	obj := p.kind.newObject()
	if obs, started, err := plugin.ReadAttempt(ctx, r, tc, p.ResourceName(tc), p.kind.kind, obj); !started || err != nil {
		return obs, err
	}
	now := tc.Now
	if now.IsZero() {
		now = time.Now()
	}
	status, groups := p.kind.read(obj)
	j := jobState{kind: p.kind.kind, namespace: obj.GetNamespace(), name: obj.GetName(),
		created: obj.GetCreationTimestamp().Time, deleting: obj.GetDeletionTimestamp() != nil, status: status}
	obs := observeJob(j, now, p.cfg.Timeout.Duration)
	links, err := jobLogs(tc.Settings.TaskLogs, tc, j, groups, p.kind.containerName)
	if err != nil {
		// A link that cannot be rendered is left out; the attempt goes on.
		log.FromContext(ctx).Info("could not render the job's log links", "job", obj.GetName(), "error", err.Error())
	}
	obs.Logs = links
	return obs, nil
}

// Finalize has nothing to release: the jobs go with their TaskAction.
func (p *Plugin) Finalize(context.Context, client.Client, plugin.TaskContext) error { return nil }
