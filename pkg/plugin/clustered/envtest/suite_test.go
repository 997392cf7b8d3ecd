package envtest

import (
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin/clustered"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
)

var (
	suite = &enginetest.Suite{Name: "clustered", NamespacePrefix: "clu-", CRDs: jobSetCRD, Configure: configure}
	// k8s is the control plane's client, once the suite runs.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, func() { k8s = suite.Env.Client }))
}

const jobSetModule = "sigs.k8s.io/jobset"

// jobSetCRD is the JobSet CRD in its Go module (the version go.mod requires).
func jobSetCRD() ([]string, error) {
	return enginetest.ModuleCRDs(jobSetModule, "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml")
}

// configure sets Kubernetes log links.
func configure(c *config.Config) {
	c.TaskLogs = config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"}
}

// trainAction is a TaskAction as Flyte's actions service applies it for a
// clustered task (two nodes of two processes, restarts as given).
func trainAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration, restarts int32) *flytev1.TaskAction {
	t.Helper()
	return enginetest.FlyteAction(t, ns, name, retries, timeout, &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "train.ddp", Version: "v1"},
		Type: clustered.ID, Custom: plugintest.Custom(t, &plugins.ClusteredTaskSpec{Replicas: 2, NprocPerNode: 2,
			FailurePolicy: &plugins.ClusterFailurePolicy{MaxRestarts: restarts}}),
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image:   "ghcr.io/flyteorg/torch:v1",
			Command: []string{"python", "-m", "flyte.distributed._entrypoint"},
			Args:    []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
		}},
	})
}

// waitJobSet waits for the JobSet of attempt of the TaskAction name.
func waitJobSet(t *testing.T, ns, name string, attempt int32) *jobsetv1alpha2.JobSet {
	t.Helper()
	return enginetest.WaitFor[jobsetv1alpha2.JobSet](t, k8s, client.ObjectKey{Namespace: ns, Name: clustered.JobSetName(name, attempt)})
}

// setStatus plays the JobSet controller: it writes the JobSet's status as
// mutate leaves it.
func setStatus(t *testing.T, js *jobsetv1alpha2.JobSet, mutate func(*jobsetv1alpha2.JobSetStatus)) {
	t.Helper()
	enginetest.SetStatus(t, k8s, js, func(cur *jobsetv1alpha2.JobSet) { mutate(&cur.Status) })
}

// workersActive: the workers' Job has pods running.
func workersActive(s *jobsetv1alpha2.JobSetStatus) {
	s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: clustered.WorkersReplicatedJob, Active: 1, Ready: 1}}
}

// terminal sets the condition the controller sets at the JobSet's end.
func terminal(typ jobsetv1alpha2.JobSetConditionType, reason, msg string) func(*jobsetv1alpha2.JobSetStatus) {
	return func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason,
			Message: msg, LastTransitionTime: metav1.Now()})
		s.TerminalState = string(typ)
	}
}
