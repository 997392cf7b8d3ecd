package clustered

import (
	"encoding/base32"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
)

// The JobSet's shape, Flyte's: one replicated job of one Indexed Job whose
// pods are the nodes, so that pod <jobset>-workers-0-<rank> is node <rank>.
const (
	WorkersReplicatedJob = "workers"

	// AnnotationPrimaryContainer on the JobSet names the task's container in
	// its pods; AnnotationTaskType the task type.
	AnnotationPrimaryContainer = "flyte.org/primary-container"
	AnnotationTaskType         = "flyte.org/task-type"
	// LabelExecution is the run's name as a label value.
	LabelExecution = "flyte.org/execution"

	// masterPort is torchrun's rendezvous port.
	masterPort = "29500"
	// restartAttemptKey is the pods' annotation with the JobSet's restart
	// count (the JobSet controller's constants.RestartsKey).
	restartAttemptKey = "jobset.sigs.k8s.io/restart-attempt"
)

// MaxReplicas bounds the nodes: the JobSet's name leaves room for pod
// indexes up to MaxReplicas-1.
const MaxReplicas = 100000

// maxJobSetNameLen is what the JobSet's webhook allows for the longest pod
// name, "<jobset>-workers-0-<index>-<5 characters>", to be a DNS-1035 label of
// at most 63 characters, for every index below MaxReplicas (99999 at most).
const maxJobSetNameLen = 63 - len("-"+WorkersReplicatedJob+"-0-"+"99999") - len("-abcde")

// ConfigKeyCustom is the typed form's key for the task's ClusteredTaskSpec,
// in its JSON form (what Flyte's template carries in custom).
const ConfigKeyCustom = "custom"

// CodeBadTaskSpecification is Flyte's code for a task that cannot become a JobSet.
const CodeBadTaskSpecification = container.CodeBadTaskSpecification

func badSpec(format string, a ...any) error {
	return &plugin.LaunchError{Err: plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf(format, a...)}}
}

// TaskSpec is the task's ClusteredTaskSpec: Flyte's form carries it in the
// template's custom, the typed form in spec.template.config.custom (JSON).
// Fields this executor does not know are ignored, as Flyte's decoder does.
// dask.JobSpec reads its DaskJob by the same steps; not shared, as each
// engine's errors name its own message in words users already see.
func TaskSpec(t *task.Task) (*plugins.ClusteredTaskSpec, error) {
	var raw []byte
	if t.Form == task.FormFlyte {
		tmpl := &core.TaskTemplate{}
		if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
			return nil, badSpec("the task template cannot be read: %v", err)
		}
		if tmpl.GetCustom() == nil {
			return nil, badSpec("invalid ClusteredTaskSpec: the task template has no custom")
		}
		b, err := protojson.Marshal(tmpl.GetCustom())
		if err != nil {
			return nil, badSpec("invalid ClusteredTaskSpec: %v", err)
		}
		raw = b
	} else {
		s, ok := t.Config[ConfigKeyCustom]
		if !ok {
			return nil, badSpec("spec.template.config.%s is required: the ClusteredTaskSpec as JSON, e.g. {\"replicas\": 2, \"nprocPerNode\": 8}", ConfigKeyCustom)
		}
		raw = []byte(s)
	}
	spec := &plugins.ClusteredTaskSpec{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, spec); err != nil {
		return nil, badSpec("invalid ClusteredTaskSpec: %v", err)
	}
	switch {
	case spec.GetReplicas() < 1:
		return nil, badSpec("replicas must be >= 1, got %d", spec.GetReplicas())
	case spec.GetReplicas() > MaxReplicas:
		return nil, badSpec("replicas must be <= %d, got %d", MaxReplicas, spec.GetReplicas())
	case spec.GetNprocPerNode() < 1:
		return nil, badSpec("nproc_per_node must be >= 1, got %d", spec.GetNprocPerNode())
	case spec.GetFailurePolicy().GetMaxRestarts() < 0:
		return nil, badSpec("failure_policy.max_restarts must be >= 0, got %d", spec.GetFailurePolicy().GetMaxRestarts())
	case spec.GetTtlSecondsAfterFinished() != nil && spec.GetTtlSecondsAfterFinished().GetValue() > math.MaxInt32:
		return nil, badSpec("ttl_seconds_after_finished %d exceeds maximum allowed value", spec.GetTtlSecondsAfterFinished().GetValue())
	}
	return spec, nil
}

// nameEncoding is Flyte's base32 alphabet of hashed names.
var nameEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz123456").WithPadding(base32.NoPadding)

// JobSetName is the JobSet of attempt (1-based) of the TaskAction named
// taskActionName: Flyte's "<name>-<attempt-1>" when it is a DNS-1035 label
// of at most 41 characters (room for the pods' names); otherwise, as Flyte
// names a longer one, "f" and the base32 of its FNV-32a hash.
func JobSetName(taskActionName string, attempt int32) string {
	name := taskActionName + "-" + strconv.Itoa(int(max(attempt, 1)-1))
	if len(name) <= maxJobSetNameLen && len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return "f" + nameEncoding.EncodeToString(h.Sum(nil))
}

// Build is the JobSet of attempt tc.Attempt, by the rules of Flyte's
// clustered plugin: the task's pod, with torchrun's environment in its
// primary container, is the template of one Indexed Job of spec.replicas
// pods that run to completion once (no Job retries: the JobSet's failure
// policy restarts the whole cluster), reachable by DNS as
// <pod>.<jobset>. It modifies nothing it is given.
func Build(tc plugin.TaskContext, spec *plugins.ClusteredTaskSpec) (*jobsetv1alpha2.JobSet, error) {
	if tc.TaskAction == nil || tc.Task == nil {
		return nil, fmt.Errorf("no TaskAction or task in the task context")
	}
	ta := tc.TaskAction
	name := JobSetName(ta.Name, tc.Attempt)
	pod, err := container.BuildPod(tc)
	if err != nil {
		return nil, err
	}
	primary := pod.Annotations[container.AnnotationPrimaryContainer]
	podSpec := pod.Spec
	for i := range podSpec.Containers {
		if podSpec.Containers[i].Name == primary {
			podSpec.Containers[i].Env = container.MergeEnv(podSpec.Containers[i].Env, torchRunEnv(spec))
		}
	}
	// One run per pod: a restart is the JobSet's, of every node at once.
	podSpec.RestartPolicy = corev1.RestartPolicyNever
	if podSpec.Subdomain == "" {
		// The JobSet's headless Service: the nodes find rank 0 by name.
		podSpec.Subdomain = name
	}
	// The JobSet controller copies no metadata of its own to the pods: they
	// carry the task pod's, where the primary container is named by the
	// JobSet's annotation instead.
	podAnnotations := maps.Clone(pod.Annotations)
	delete(podAnnotations, container.AnnotationPrimaryContainer)

	replicas := spec.GetReplicas()
	indexed := batchv1.IndexedCompletion
	noRetries := int32(0)
	enableDNS := true
	js := &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.SchemeGroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ta.Namespace,
			Labels:          container.Union(pod.Labels, map[string]string{LabelExecution: sanitizeLabelValue(ta.Spec.RunName)}),
			Annotations:     container.Union(podAnnotations, map[string]string{AnnotationTaskType: ID, AnnotationPrimaryContainer: primary}),
			OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(ta)},
		},
		Spec: jobsetv1alpha2.JobSetSpec{
			Network:       &jobsetv1alpha2.Network{EnableDNSHostnames: &enableDNS},
			SuccessPolicy: &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
			FailurePolicy: failurePolicy(spec),
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name:     WorkersReplicatedJob,
				Replicas: 1,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: &replicas, Completions: &replicas, CompletionMode: &indexed, BackoffLimit: &noRetries,
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: podAnnotations},
						Spec:       podSpec,
					},
				}},
			}},
		},
	}
	if ttl := spec.GetTtlSecondsAfterFinished(); ttl != nil {
		v := int32(ttl.GetValue()) // bounded by TaskSpec
		js.Spec.TTLSecondsAfterFinished = &v
	}
	return js, nil
}

// failurePolicy restarts the whole JobSet up to failure_policy.max_restarts
// times; none without restarts (Flyte's rule).
func failurePolicy(spec *plugins.ClusteredTaskSpec) *jobsetv1alpha2.FailurePolicy {
	n := spec.GetFailurePolicy().GetMaxRestarts()
	if n <= 0 {
		return nil
	}
	return &jobsetv1alpha2.FailurePolicy{MaxRestarts: n}
}

// torchRunEnv is what the SDK's entrypoint and torchrun read: the cluster's
// shape, the rendezvous, the restart budget (the same as the JobSet's, so
// that the runtime writes its error only on the last restart) and where the
// pod stands (the JobSet's name and restart from its labels, the namespace).
func torchRunEnv(spec *plugins.ClusteredTaskSpec) []corev1.EnvVar {
	rdzv := "static"
	if spec.GetRuntime().GetTorchrun().GetRdzvBackend() == plugins.RdzvBackend_C10D {
		rdzv = "c10d"
	}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return []corev1.EnvVar{
		{Name: "NNODES", Value: strconv.Itoa(int(spec.GetReplicas()))},
		{Name: "NPROC_PER_NODE", Value: strconv.Itoa(int(spec.GetNprocPerNode()))},
		{Name: "MASTER_PORT", Value: masterPort},
		{Name: "RDZV_BACKEND", Value: rdzv},
		{Name: "JOBSET_MAX_RESTARTS", Value: strconv.Itoa(int(spec.GetFailurePolicy().GetMaxRestarts()))},
		{Name: "JOBSET_NAME", ValueFrom: field("metadata.labels['" + jobsetv1alpha2.JobSetNameKey + "']")},
		{Name: "JOBSET_RESTART_ATTEMPT", ValueFrom: field("metadata.annotations['" + restartAttemptKey + "']")},
		{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
	}
}

// sanitizeLabelValue is Flyte's label value of an execution's name: the
// container plugin's LabelValue, but "none" for an empty name.
func sanitizeLabelValue(v string) string {
	if v == "" {
		return "none"
	}
	return container.LabelValue(v)
}
