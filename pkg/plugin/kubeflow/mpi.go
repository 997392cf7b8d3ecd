package kubeflow

import (
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	kfidl "github.com/taskaction/executor/gen/flyteidl2/plugins/kubeflow"
)

// WorkerSpecCommandKey is the template config key of version 0's worker
// command (Flyte's): split at spaces, it replaces the workers' args.
const WorkerSpecCommandKey = "worker_spec_command"

// buildMPIJob is the MPIJob of an mpi task, by Flyte's rules: the launcher
// runs the task's pod; version 0's workers run the template config's
// worker_spec_command instead of the task's command and args; version 1
// builds the launcher (always one replica) and the workers from their
// replica specs, whose command replaces the container's args, with the run
// policy. There must be workers.
func (b builder) buildMPIJob() (*kubeflowv1.MPIJob, error) {
	var v0 plugins.DistributedMPITrainingTask
	var v1 kfidl.DistributedMPITrainingTask
	version, err := b.custom(&v0, &v1)
	if err != nil {
		return nil, err
	}
	name := kubeflowv1.MPIJobDefaultContainerName
	var launcher, worker *kubeflowv1.ReplicaSpec
	var rp kubeflowv1.RunPolicy
	var slots int32
	if version == 0 {
		tmpl, err := b.replicaTemplate(name, replicaOverride{})
		if err != nil {
			return nil, err
		}
		// Flyte splits at single spaces and replaces the args even when the
		// key is absent (with none).
		var args []string
		if cmd, ok := b.tc.Task.Config[WorkerSpecCommandKey]; ok {
			args = strings.Split(cmd, " ")
		}
		workerTmpl, err := b.replicaTemplate(name, replicaOverride{args: args, setArgs: true, clearCommand: true})
		if err != nil {
			return nil, err
		}
		launcher = &kubeflowv1.ReplicaSpec{Replicas: ptr(max(v0.GetNumLauncherReplicas(), 1)), Template: tmpl, RestartPolicy: kubeflowv1.RestartPolicyNever}
		worker = &kubeflowv1.ReplicaSpec{Replicas: ptr(v0.GetNumWorkers()), Template: workerTmpl, RestartPolicy: kubeflowv1.RestartPolicyNever}
		slots = v0.GetSlots()
	} else {
		if launcher, err = b.replicaSpec(name, v1.GetLauncherReplicas(), v1.GetLauncherReplicas().GetCommand(), true); err != nil {
			return nil, err
		}
		if worker, err = b.replicaSpec(name, v1.GetWorkerReplicas(), v1.GetWorkerReplicas().GetCommand(), false); err != nil {
			return nil, err
		}
		if rp, err = runPolicy(v1.GetRunPolicy()); err != nil {
			return nil, err
		}
		// Flyte leaves version 1's slots out (one slot per worker whatever
		// the task asks); the task's are used here.
		slots = v1.GetSlots()
	}
	if *worker.Replicas <= 0 {
		return nil, badSpec("an MPI job needs at least one worker, the task asks for %d", *worker.Replicas)
	}
	// No slots would leave mpirun's hostfile without room (Flyte writes 0).
	slots = max(slots, 1)
	return &kubeflowv1.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubeflowv1.SchemeGroupVersion.String(), Kind: kubeflowv1.MPIJobKind},
		ObjectMeta: b.objectMeta(launcher.Template),
		Spec: kubeflowv1.MPIJobSpec{SlotsPerWorker: &slots, RunPolicy: rp,
			MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
				kubeflowv1.MPIJobReplicaTypeLauncher: launcher, kubeflowv1.MPIJobReplicaTypeWorker: worker}},
	}, nil
}
