package envtest

import (
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin/dask"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
)

var (
	suite = &enginetest.Suite{Name: "dask", NamespacePrefix: "dask-", CRDs: operatorCRDs, Configure: configure}
	// k8s is the control plane's client, once the suite runs.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, func() { k8s = suite.Env.Client }))
}

const operatorModule = "github.com/dask/dask-kubernetes/v2023"

// operatorCRDs is the directory of the Dask operator's CRDs in its Go module
// (the version go.mod requires): the generated CRDs its Helm chart installs
// (customresources/ holds only their templates).
func operatorCRDs() ([]string, error) {
	return enginetest.ModuleCRDs(operatorModule, "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator/crds")
}

// configure sets plugins.dask's links: the Kubernetes one and a dashboard.
func configure(c *config.Config) {
	c.PluginSections = map[string]any{"dask": map[string]any{"logs": map[string]any{
		"kubernetes-enabled": true, "kubernetes-template-uri": "http://dashboard/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
		"templates": []any{map[string]any{"displayName": "Dask Dashboard", "linkType": "dashboard",
			"templateUris": []any{"http://dask/{{ .namespace }}/{{ .generatedName }}/status"}}},
	}}}
}

// daskAction is a TaskAction as Flyte's actions service applies it for a
// dask task (two workers).
func daskAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	return enginetest.FlyteAction(t, ns, name, retries, timeout, &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf.dask_sum", Version: "v1"},
		Type: dask.ID, Custom: plugintest.Custom(t, &plugins.DaskJob{Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 2}}),
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/dask:v1",
			Args:  []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
		}},
	})
}

// waitJob waits for the DaskJob of attempt of the TaskAction name.
func waitJob(t *testing.T, ns, name string, attempt int32) *daskv1.DaskJob {
	t.Helper()
	return enginetest.WaitFor[daskv1.DaskJob](t, k8s, client.ObjectKey{Namespace: ns, Name: dask.JobName(name, attempt)})
}

// setStatus plays the Dask operator: it writes the job's status as mutate
// leaves it.
func setStatus(t *testing.T, job *daskv1.DaskJob, mutate func(*daskv1.DaskJobStatus)) {
	t.Helper()
	enginetest.SetStatus(t, k8s, job, func(cur *daskv1.DaskJob) { mutate(&cur.Status) })
}

// The operator's steps: the job created, its cluster and runner pod
// created, the runner running (its start recorded), the runner's end.
func jobCreated(s *daskv1.DaskJobStatus) { s.JobStatus = daskv1.DaskJobCreated }

func clusterCreated(name string) func(*daskv1.DaskJobStatus) {
	return func(s *daskv1.DaskJobStatus) {
		s.JobStatus, s.ClusterName, s.JobRunnerPodName = daskv1.DaskJobClusterCreated, name, name+"-runner"
	}
}

func running(s *daskv1.DaskJobStatus) {
	s.JobStatus, s.StartTime = daskv1.DaskJobRunning, metav1.Now()
}

func ended(status daskv1.JobStatus) func(*daskv1.DaskJobStatus) {
	return func(s *daskv1.DaskJobStatus) { s.JobStatus, s.EndTime = status, metav1.Now() }
}
