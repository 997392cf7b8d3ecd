package dask

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// Container names, ports and labels of the DaskJob, Flyte's (the operator's
// conventions: its scheduler Service selects the scheduler pod by them).
const (
	ContainerJobRunner = "job-runner"
	ContainerScheduler = "scheduler"
	ContainerWorker    = "dask-worker"

	portComm      = 8786
	portDashboard = 8787
	portNameComm  = "tcp-comm"
	portNameDash  = "dashboard"

	LabelClusterName = "dask.org/cluster-name"
	LabelComponent   = "dask.org/component"
)

// ConfigKeyCustom is the typed form's key for the task's DaskJob message, in
// its JSON form (what Flyte's template carries in custom), e.g.
// {"workers": {"numberOfWorkers": 2}}.
const ConfigKeyCustom = "custom"

// CodeBadTaskSpecification is Flyte's code for a task that cannot become a DaskJob.
const CodeBadTaskSpecification = container.CodeBadTaskSpecification

func badSpec(format string, a ...any) error {
	return &plugin.LaunchError{Err: plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf(format, a...)}}
}

// JobSpec is the task's DaskJob message: Flyte's form carries it in the
// template's custom, the typed form in spec.template.config.custom (JSON).
// Fields this executor does not know are ignored, as Flyte's decoder does.
func JobSpec(t *task.Task) (*plugins.DaskJob, error) {
	var raw []byte
	if t.Form == task.FormFlyte {
		tmpl := &core.TaskTemplate{}
		if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
			return nil, badSpec("the task template cannot be read: %v", err)
		}
		if tmpl.GetCustom() == nil {
			return nil, badSpec("the task template has no custom DaskJob")
		}
		b, err := protojson.Marshal(tmpl.GetCustom())
		if err != nil {
			return nil, badSpec("the template's custom cannot be read: %v", err)
		}
		raw = b
	} else {
		s, ok := t.Config[ConfigKeyCustom]
		if !ok {
			return nil, badSpec("spec.template.config.%s is required: the DaskJob as JSON, e.g. {\"workers\": {\"numberOfWorkers\": 2}}", ConfigKeyCustom)
		}
		raw = []byte(s)
	}
	job := &plugins.DaskJob{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, job); err != nil {
		return nil, badSpec("the task's custom is not a DaskJob: %v", err)
	}
	return job, nil
}

// maxJobNameLen keeps the names the operator derives from the job's within
// a DNS-1035 label: its scheduler Service is "<name>-scheduler".
const maxJobNameLen = 63 - len("-scheduler")

// JobName is the DaskJob of attempt (1-based) of the TaskAction named
// taskActionName: its pod's name, "<name>-<attempt-1>", when that is a
// DNS-1035 label of at most maxJobNameLen characters; else the name
// shortened (and prefixed with "dask-" when it does not start with a letter)
// with a hash of the TaskAction's name, so that names stay distinct and stable.
func JobName(taskActionName string, attempt int32) string {
	name := container.PodName(taskActionName, attempt)
	if len(name) <= maxJobNameLen && name[0] >= 'a' && name[0] <= 'z' {
		return name
	}
	suffix := "-" + strconv.Itoa(int(max(attempt, 1)-1))
	h := fnv.New32a()
	_, _ = h.Write([]byte(taskActionName))
	hash := fmt.Sprintf("%08x", h.Sum32())
	base := strings.TrimSuffix(name, suffix)
	if base[0] < 'a' || base[0] > 'z' {
		base = "dask-" + base
	}
	if keep := maxJobNameLen - len(suffix) - len(hash) - 1; len(base) > keep {
		base = strings.TrimRight(base[:keep], "-")
	}
	return base + "-" + hash + suffix
}

// Build is the DaskJob of attempt tc.Attempt, by the rules of Flyte's dask
// plugin: the job runner is the task's pod, the scheduler the same pod with
// the scheduler's image, resources and command, both never interruptible;
// the workers run the task's pod (interruptible as the task) with the
// workers' image, resources and command. dashboardPrefix, when set, is the
// scheduler's --dashboard-prefix. It modifies nothing it is given.
func Build(tc plugin.TaskContext, spec *plugins.DaskJob, dashboardPrefix string) (*daskv1.DaskJob, error) {
	if tc.TaskAction == nil || tc.Task == nil {
		return nil, fmt.Errorf("no TaskAction or task in the task context")
	}
	name := JobName(tc.TaskAction.Name, tc.Attempt)

	// The job runner and the scheduler must not be preempted: losing either
	// loses the job.
	steady := tc
	t := *tc.Task
	t.Interruptible = false
	steady.Task = &t
	runner, err := container.BuildPod(steady)
	if err != nil {
		return nil, err
	}
	primary := runner.Annotations[container.AnnotationPrimaryContainer]

	sched := spec.GetScheduler()
	schedTask, err := withImageAndResources(steady.Task, sched.GetImage(), sched.GetResources(), "scheduler")
	if err != nil {
		return nil, err
	}
	steady.Task = schedTask
	scheduler, err := container.BuildPod(steady)
	if err != nil {
		return nil, err
	}

	workers := spec.GetWorkers()
	workerTask, err := withImageAndResources(tc.Task, workers.GetImage(), workers.GetResources(), "workers")
	if err != nil {
		return nil, err
	}
	wtc := tc
	wtc.Task = workerTask
	worker, err := container.BuildPod(wtc)
	if err != nil {
		return nil, err
	}

	runnerSpec := runner.Spec
	primaryOf(&runnerSpec, primary).Name = ContainerJobRunner
	runnerSpec.RestartPolicy = corev1.RestartPolicyNever

	schedSpec := scheduler.Spec
	sc := primaryOf(&schedSpec, primary)
	sc.Name = ContainerScheduler
	sc.Args = []string{"dask", "scheduler"}
	if dashboardPrefix != "" {
		sc.Args = append(sc.Args, "--dashboard-prefix", dashboardPrefix)
	}
	sc.Ports = []corev1.ContainerPort{
		{Name: portNameComm, ContainerPort: portComm, Protocol: corev1.ProtocolTCP},
		{Name: portNameDash, ContainerPort: portDashboard, Protocol: corev1.ProtocolTCP},
	}
	if sc.ReadinessProbe == nil {
		sc.ReadinessProbe = &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString(portNameDash)}},
			InitialDelaySeconds: 5, PeriodSeconds: 5, FailureThreshold: 30,
		}
	}
	// The operator runs the scheduler and the workers as Deployments.
	schedSpec.RestartPolicy = corev1.RestartPolicyAlways

	workerSpec := worker.Spec
	wc := primaryOf(&workerSpec, primary)
	wc.Name = ContainerWorker
	wc.Args = workerArgs(wc.Resources)
	workerSpec.RestartPolicy = corev1.RestartPolicyAlways

	// The operator copies the DaskJob's labels and annotations onto every pod
	// it creates; the primary-container annotation would name a container
	// none of them has (Flyte does not set it either).
	annotations := maps.Clone(runner.Annotations)
	delete(annotations, container.AnnotationPrimaryContainer)
	return &daskv1.DaskJob{
		TypeMeta: metav1.TypeMeta{APIVersion: daskv1.SchemeGroupVersion.String(), Kind: "DaskJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: tc.TaskAction.Namespace,
			Labels: runner.Labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(tc.TaskAction)},
		},
		Spec: daskv1.DaskJobSpec{
			Job: daskv1.JobSpec{Spec: runnerSpec},
			// No cluster metadata: the operator's CRD has no
			// spec.cluster.metadata (the API server would drop it); the
			// cluster gets the DaskJob's labels and annotations.
			Cluster: daskv1.DaskCluster{
				Spec: daskv1.DaskClusterSpec{
					Worker: daskv1.WorkerSpec{Replicas: int(workers.GetNumberOfWorkers()), Spec: workerSpec},
					Scheduler: daskv1.SchedulerSpec{
						Spec: schedSpec,
						Service: corev1.ServiceSpec{
							Type:     corev1.ServiceTypeNodePort,
							Selector: map[string]string{LabelClusterName: name, LabelComponent: "scheduler"},
							Ports: []corev1.ServicePort{
								{Name: portNameComm, Protocol: corev1.ProtocolTCP, Port: portComm, TargetPort: intstr.FromString(portNameComm)},
								{Name: portNameDash, Protocol: corev1.ProtocolTCP, Port: portDashboard, TargetPort: intstr.FromString(portNameDash)},
							},
						},
					},
				},
			},
		},
	}, nil
}

// primaryOf is the task's container in spec (BuildPod always has it).
func primaryOf(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return &spec.Containers[0]
}

// workerArgs start a Dask worker named by the operator; limits, which Flyte
// always sets by then, give the worker's threads (whole CPUs, rounded up)
// and memory, as Dask's guide advises.
func workerArgs(r corev1.ResourceRequirements) []string {
	args := []string{"dask", "worker", "--name", "$(DASK_WORKER_NAME)"}
	if r.Limits != nil {
		args = append(args, "--nthreads", strconv.FormatInt(r.Limits.Cpu().Value(), 10),
			"--memory-limit", r.Limits.Memory().String())
	}
	return args
}

// withImageAndResources is t with its primary container's image replaced
// by image when set, and its resources by res when res holds any request or
// limit (as Flyte, which then applies the default requests and limits to
// them as to the task's own). t is not modified.
func withImageAndResources(t *task.Task, image string, res *core.Resources, field string) (*task.Task, error) {
	if image == "" && len(res.GetRequests()) == 0 && len(res.GetLimits()) == 0 {
		return t, nil
	}
	out := *t
	var rr *corev1.ResourceRequirements
	if len(res.GetRequests()) > 0 || len(res.GetLimits()) > 0 {
		// Converted as Flyte converts a template's; a bad quantity is the
		// task's fault.
		r, err := task.ResourceRequirements(res, field+".resources")
		if err != nil {
			return nil, badSpec("%v", err)
		}
		rr = &r
	}
	if t.Container != nil {
		c := *t.Container
		if image != "" {
			c.Image = image
		}
		if rr != nil {
			c.Resources = *rr.DeepCopy()
		}
		out.Container = &c
	}
	if t.PodSpec != nil && t.PrimaryContainerName != "" {
		spec := t.PodSpec.DeepCopy()
		for i := range spec.Containers {
			if spec.Containers[i].Name != t.PrimaryContainerName {
				continue
			}
			if image != "" {
				spec.Containers[i].Image = image
			}
			if rr != nil {
				spec.Containers[i].Resources = *rr.DeepCopy()
			}
		}
		out.PodSpec = spec
	}
	return &out, nil
}

// DashboardPrefix is the path the scheduler's dashboard is served under,
// from the first link of type dashboard the configuration renders for the
// attempt: its URI's path without a trailing /status (the dashboard's
// landing tab). Empty without such a link.
func DashboardPrefix(logs *tasklog.Renderer, tc plugin.TaskContext) (string, error) {
	if logs == nil {
		return "", nil
	}
	links, err := logs.Links(plugin.LogInput(tc, tc.TaskAction.Namespace, JobName(tc.TaskAction.Name, tc.Attempt)))
	if err != nil {
		return "", fmt.Errorf("render the Dask dashboard link: %w", err)
	}
	for _, l := range links {
		if l.GetLinkType() != core.TaskLog_DASHBOARD {
			continue
		}
		u, err := url.Parse(l.GetUri())
		if err != nil {
			return "", fmt.Errorf("the Dask dashboard link %q: %w", l.GetUri(), err)
		}
		return strings.TrimSuffix(u.Path, "/status"), nil
	}
	return "", nil
}
