package envtest

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/plugin/ray"
)

var (
	suite = &enginetest.Suite{Name: "ray", NamespacePrefix: "ray-", CRDs: kuberayCRDs, Configure: configure}
	// k8s is the control plane's client, once the suite runs.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, func() { k8s = suite.Env.Client }))
}

const kuberayModule = "github.com/ray-project/kuberay/ray-operator"

// kuberayCRDs are KubeRay's RayJob and RayCluster CRDs from its Go module.
func kuberayCRDs() ([]string, error) {
	return enginetest.ModuleCRDs(kuberayModule, "config/crd/bases/ray.io_rayjobs.yaml", "config/crd/bases/ray.io_rayclusters.yaml")
}

// dashboardTemplate is plugins.ray.dashboardURLTemplate here.
const dashboardTemplate = "http://ray/{{ .namespace }}/{{ .rayClusterName }}/#/jobs/{{ .rayJobID }}"

// configure sets Kubernetes log links and a Ray dashboard link in
// plugins.ray.
func configure(c *config.Config) {
	c.TaskLogs = config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"}
	c.PluginSections = map[string]any{"ray": map[string]any{
		"dashboardURLTemplate": map[string]any{"displayName": "Ray Dashboard", "templateUris": []any{dashboardTemplate}},
	}}
}

// rayAction is a TaskAction as Flyte's actions service applies it for a ray
// task (a head and one group of two workers).
func rayAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	return enginetest.FlyteAction(t, ns, name, retries, timeout, &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "train.ray", Version: "v1"},
		Type: ray.ID, Custom: plugintest.Custom(t, &plugins.RayJob{
			RayCluster: &plugins.RayCluster{
				HeadGroupSpec:   &plugins.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "0"}},
				WorkerGroupSpec: []*plugins.WorkerGroupSpec{{GroupName: "workers", Replicas: 2, MinReplicas: 2, MaxReplicas: 2}},
			},
			RuntimeEnvYaml: "pip:\n- numpy\n",
		}),
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "rayproject/ray:2.44.0",
			Args:  []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
		}},
	})
}

// waitJob waits for the RayJob of attempt of the TaskAction name.
func waitJob(t *testing.T, ns, name string, attempt int32) *rayv1.RayJob {
	t.Helper()
	return enginetest.WaitFor[rayv1.RayJob](t, k8s, client.ObjectKey{Namespace: ns, Name: ray.JobName(name, attempt)})
}

// setStatus plays KubeRay: it writes the RayJob's status as mutate leaves
// it.
func setStatus(t *testing.T, job *rayv1.RayJob, mutate func(*rayv1.RayJobStatus)) {
	t.Helper()
	enginetest.SetStatus(t, k8s, job, func(cur *rayv1.RayJob) { mutate(&cur.Status) })
}

// kubeRayFinalizer is the finalizer KubeRay puts on every RayJob (it stops
// the Ray job before letting the RayJob go).
const kubeRayFinalizer = "ray.io/rayjob-finalizer"

// holdFinalizer plays KubeRay's finalizer: added at once, removed (the Ray
// job stopped) once the test saw the RayJob being deleted.
func holdFinalizer(t *testing.T, job *rayv1.RayJob) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+kubeRayFinalizer+`"]}}`))
	if err := k8s.Patch(context.Background(), job, patch); err != nil {
		t.Fatalf("add KubeRay's finalizer: %v", err)
	}
}

// releaseFinalizer waits until the RayJob is being deleted, then lets it go.
func releaseFinalizer(t *testing.T, job *rayv1.RayJob) {
	t.Helper()
	enginetest.Eventually(t, "RayJob "+job.Name+" being deleted", func() bool {
		cur := &rayv1.RayJob{}
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur) == nil && cur.UID == job.UID && cur.DeletionTimestamp != nil
	})
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	cur := job.DeepCopy()
	if err := k8s.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("remove KubeRay's finalizer: %v", err)
	}
}

// The statuses KubeRay writes as a RayJob goes: the cluster named and being
// created, the job submitted and running, the end.
func initializing(job *rayv1.RayJob) func(*rayv1.RayJobStatus) {
	return func(s *rayv1.RayJobStatus) {
		now := metav1.Now()
		s.JobDeploymentStatus, s.StartTime = rayv1.JobDeploymentStatusInitializing, &now
		s.RayClusterName, s.JobId = job.Name+"-x7k2p", job.Name+"-q9w4z"
		s.JobStatus = rayv1.JobStatusNew
		s.RayClusterStatus.DesiredWorkerReplicas = 2
	}
}

func running(s *rayv1.RayJobStatus) {
	now := metav1.Now()
	s.JobDeploymentStatus, s.JobStatus = rayv1.JobDeploymentStatusRunning, rayv1.JobStatusRunning
	s.DashboardURL = s.RayClusterName + "-head-svc:8265"
	s.RayJobStatusInfo.StartTime = &now
	s.RayClusterStatus.ReadyWorkerReplicas = 2
}

func ended(deployment rayv1.JobDeploymentStatus, job rayv1.JobStatus, reason rayv1.JobFailedReason, msg string) func(*rayv1.RayJobStatus) {
	return func(s *rayv1.RayJobStatus) {
		now := metav1.Now()
		s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message = deployment, job, reason, msg
		s.EndTime, s.RayJobStatusInfo.EndTime = &now, &now
	}
}
