package kubeflow

import (
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	kfidl "github.com/taskaction/executor/gen/flyteidl2/plugins/kubeflow"
)

// elasticConfig is the elastic configuration of either task type version.
type elasticConfig interface {
	GetRdzvBackend() string
	GetMinReplicas() int32
	GetMaxReplicas() int32
	GetNprocPerNode() int32
	GetMaxRestarts() int32
}

func elasticPolicy(c elasticConfig) *kubeflowv1.ElasticPolicy {
	backend := kubeflowv1.RDZVBackend(c.GetRdzvBackend())
	minReplicas, maxReplicas, nproc, restarts := c.GetMinReplicas(), c.GetMaxReplicas(), c.GetNprocPerNode(), c.GetMaxRestarts()
	return &kubeflowv1.ElasticPolicy{MinReplicas: &minReplicas, MaxReplicas: &maxReplicas, RDZVBackend: &backend,
		NProcPerNode: &nproc, MaxRestarts: &restarts}
}

// buildPyTorchJob is the PyTorchJob of a pytorch task, by Flyte's rules:
// version 0 runs the task's pod as one master and `workers` workers;
// version 1 builds the master (always one replica) and the workers from
// their replica specs, with the run policy. With an elastic configuration
// the job has no master.
func (b builder) buildPyTorchJob() (*kubeflowv1.PyTorchJob, error) {
	var v0 plugins.DistributedPyTorchTrainingTask
	var v1 kfidl.DistributedPyTorchTrainingTask
	version, err := b.custom(&v0, &v1)
	if err != nil {
		return nil, err
	}
	name := kubeflowv1.PyTorchJobDefaultContainerName
	var master, worker *kubeflowv1.ReplicaSpec
	var rp kubeflowv1.RunPolicy
	var elastic *kubeflowv1.ElasticPolicy
	if version == 0 {
		tmpl, err := b.replicaTemplate(name, replicaOverride{})
		if err != nil {
			return nil, err
		}
		master = &kubeflowv1.ReplicaSpec{Replicas: ptr(int32(1)), Template: tmpl, RestartPolicy: kubeflowv1.RestartPolicyNever}
		worker = &kubeflowv1.ReplicaSpec{Replicas: ptr(v0.GetWorkers()), Template: *tmpl.DeepCopy(), RestartPolicy: kubeflowv1.RestartPolicyNever}
		if c := v0.GetElasticConfig(); c != nil {
			elastic = elasticPolicy(c)
		}
	} else {
		if v1.GetElasticConfig() == nil {
			if master, err = b.replicaSpec(name, v1.GetMasterReplicas(), nil, true); err != nil {
				return nil, err
			}
		}
		if worker, err = b.replicaSpec(name, v1.GetWorkerReplicas(), nil, false); err != nil {
			return nil, err
		}
		if rp, err = runPolicy(v1.GetRunPolicy()); err != nil {
			return nil, err
		}
		if c := v1.GetElasticConfig(); c != nil {
			elastic = elasticPolicy(c)
		}
	}
	if *worker.Replicas <= 0 {
		return nil, badSpec("a PyTorch job needs at least one worker, the task asks for %d", *worker.Replicas)
	}
	specs := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{kubeflowv1.PyTorchJobReplicaTypeWorker: worker}
	if elastic == nil {
		specs[kubeflowv1.PyTorchJobReplicaTypeMaster] = master
	}
	return &kubeflowv1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.SchemeGroupVersion.String(), Kind: kubeflowv1.PyTorchJobKind},
		ObjectMeta: b.objectMeta(worker.Template),
		Spec:       kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: specs, RunPolicy: rp, ElasticPolicy: elastic},
	}, nil
}

// replicaSpec is a group of version 1 (a master has one replica whatever it
// asks); command, when set, replaces the primary container's args (Flyte
// replaces the args, not the command).
func (b builder) replicaSpec(containerName string, g replicaGroup, command []string, master bool) (*kubeflowv1.ReplicaSpec, error) {
	replicas, o, restart := groupSpec(g)
	if master {
		replicas = 1
	}
	if len(command) > 0 {
		o.args, o.setArgs = command, true
	}
	tmpl, err := b.replicaTemplate(containerName, o)
	if err != nil {
		return nil, err
	}
	policy, err := restartPolicy(restart)
	if err != nil {
		return nil, err
	}
	return &kubeflowv1.ReplicaSpec{Replicas: &replicas, Template: tmpl, RestartPolicy: policy}, nil
}

func ptr[T any](v T) *T { return &v }
