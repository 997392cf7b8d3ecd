package envtest

import (
	"os"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin/kubeflow"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
)

var (
	suite = &enginetest.Suite{Name: "kubeflow", NamespacePrefix: "kf-", CRDs: operatorCRDs, Configure: configure}
	// k8s is the control plane's client, once the suite runs.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, func() { k8s = suite.Env.Client }))
}

const operatorModule = "github.com/kubeflow/training-operator"

// operatorCRDs are the training operator's CRDs of the three job kinds, from
// its Go module (the version go.mod requires).
func operatorCRDs() ([]string, error) {
	var files []string
	for _, kind := range []string{"pytorchjobs", "tfjobs", "mpijobs"} {
		files = append(files, "manifests/base/crds/kubeflow.org_"+kind+".yaml")
	}
	return enginetest.ModuleCRDs(operatorModule, files...)
}

// configure sets Kubernetes log links.
func configure(c *config.Config) {
	c.TaskLogs = config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"}
}

// pytorchAction is a TaskAction as Flyte's actions service applies it for a
// pytorch task (task type version 1, one master and two workers).
func pytorchAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	return enginetest.FlyteAction(t, ns, name, retries, timeout, &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "train.ddp", Version: "v1"},
		Type: kubeflow.PyTorch, TaskTypeVersion: 1,
		Custom: plugintest.Struct(t, map[string]any{
			"masterReplicas": map[string]any{"common": map[string]any{"replicas": 1}},
			"workerReplicas": map[string]any{"common": map[string]any{"replicas": 2}},
			"runPolicy":      map[string]any{"cleanPodPolicy": "CLEANPOD_POLICY_RUNNING"},
		}),
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/torch:v1",
			Args:  []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
		}},
	})
}

// waitJob waits for the PyTorchJob of attempt of the TaskAction name.
func waitJob(t *testing.T, ns, name string, attempt int32) *kubeflowv1.PyTorchJob {
	t.Helper()
	return enginetest.WaitFor[kubeflowv1.PyTorchJob](t, k8s, client.ObjectKey{Namespace: ns, Name: kubeflow.JobName(name, attempt)})
}

// setStatus plays the training operator: it writes the job's status as
// mutate leaves it.
func setStatus(t *testing.T, job *kubeflowv1.PyTorchJob, mutate func(*kubeflowv1.JobStatus)) {
	t.Helper()
	enginetest.SetStatus(t, k8s, job, func(cur *kubeflowv1.PyTorchJob) { mutate(&cur.Status) })
}

// condition appends a condition of typ that is true now, as the operator
// does (the one it replaces goes false).
func condition(typ kubeflowv1.JobConditionType, reason, msg string) func(*kubeflowv1.JobStatus) {
	return func(s *kubeflowv1.JobStatus) {
		now := metav1.Now()
		if s.StartTime == nil {
			s.StartTime = &now
		}
		for i := range s.Conditions {
			if typ != kubeflowv1.JobCreated && s.Conditions[i].Type == kubeflowv1.JobRunning {
				s.Conditions[i].Status = "False"
			}
		}
		s.Conditions = append(s.Conditions, kubeflowv1.JobCondition{Type: typ, Status: "True", Reason: reason, Message: msg,
			LastTransitionTime: now, LastUpdateTime: now})
		if typ == kubeflowv1.JobSucceeded || typ == kubeflowv1.JobFailed {
			s.CompletionTime = &now
		}
	}
}
