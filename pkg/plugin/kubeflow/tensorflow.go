package kubeflow

import (
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	kfidl "github.com/taskaction/executor/gen/flyteidl2/plugins/kubeflow"
)

// tfReplicaTypes are a TFJob's replica groups, in the order the job's log
// links list them (Flyte's).
var tfReplicaTypes = []kubeflowv1.ReplicaType{kubeflowv1.TFJobReplicaTypeWorker, kubeflowv1.TFJobReplicaTypePS,
	kubeflowv1.TFJobReplicaTypeChief, kubeflowv1.TFJobReplicaTypeEval}

// buildTFJob is the TFJob of a tensorflow task, by Flyte's rules: a group of
// no replicas is left out; version 0 runs the task's pod in every group;
// version 1 builds each group from its replica spec, with the run policy.
// There must be workers.
func (b builder) buildTFJob() (*kubeflowv1.TFJob, error) {
	var v0 plugins.DistributedTensorflowTrainingTask
	var v1 kfidl.DistributedTensorflowTrainingTask
	version, err := b.custom(&v0, &v1)
	if err != nil {
		return nil, err
	}
	name := kubeflowv1.TFJobDefaultContainerName
	specs := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{}
	var rp kubeflowv1.RunPolicy
	if version == 0 {
		counts := map[kubeflowv1.ReplicaType]int32{
			kubeflowv1.TFJobReplicaTypeWorker: v0.GetWorkers(), kubeflowv1.TFJobReplicaTypePS: v0.GetPsReplicas(),
			kubeflowv1.TFJobReplicaTypeChief: v0.GetChiefReplicas(), kubeflowv1.TFJobReplicaTypeEval: v0.GetEvaluatorReplicas(),
		}
		tmpl, err := b.replicaTemplate(name, replicaOverride{})
		if err != nil {
			return nil, err
		}
		for _, rt := range tfReplicaTypes {
			if n := counts[rt]; n > 0 {
				specs[rt] = &kubeflowv1.ReplicaSpec{Replicas: ptr(n), Template: *tmpl.DeepCopy(), RestartPolicy: kubeflowv1.RestartPolicyNever}
			}
		}
	} else {
		groups := map[kubeflowv1.ReplicaType]*kfidl.DistributedTensorflowTrainingReplicaSpec{
			kubeflowv1.TFJobReplicaTypeWorker: v1.GetWorkerReplicas(), kubeflowv1.TFJobReplicaTypePS: v1.GetPsReplicas(),
			kubeflowv1.TFJobReplicaTypeChief: v1.GetChiefReplicas(), kubeflowv1.TFJobReplicaTypeEval: v1.GetEvaluatorReplicas(),
		}
		for _, rt := range tfReplicaTypes {
			g := groups[rt]
			if g == nil {
				continue
			}
			if n, _, _ := groupSpec(g); n <= 0 {
				continue
			}
			if specs[rt], err = b.replicaSpec(name, g, nil, false); err != nil {
				return nil, err
			}
		}
		if rp, err = runPolicy(v1.GetRunPolicy()); err != nil {
			return nil, err
		}
	}
	worker, ok := specs[kubeflowv1.TFJobReplicaTypeWorker]
	if !ok {
		return nil, badSpec("a TensorFlow job needs at least one worker, the task asks for none")
	}
	return &kubeflowv1.TFJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.SchemeGroupVersion.String(), Kind: kubeflowv1.TFJobKind},
		ObjectMeta: b.objectMeta(worker.Template),
		Spec:       kubeflowv1.TFJobSpec{TFReplicaSpecs: specs, RunPolicy: rp},
	}, nil
}
