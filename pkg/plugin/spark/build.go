package spark

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	sparkcommon "github.com/kubeflow/spark-operator/v2/pkg/common"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
)

// CodeBadTaskSpecification is Flyte's code for a task that cannot become a
// SparkApplication (a permanent user failure).
const CodeBadTaskSpecification = container.CodeBadTaskSpecification

// ConfigKey holds a typed TaskAction's Spark job (spec.template.config):
// the JSON form of flyteidl2.plugins.SparkJob, as Flyte's SDKs write a
// template's custom.
const ConfigKey = "sparkJob"

// Names the operator gives the driver's and executors' containers; the pod
// templates name the task's container so, so that the operator finds it.
const (
	DriverContainerName   = sparkcommon.SparkDriverContainerName
	ExecutorContainerName = sparkcommon.Spark3DefaultExecutorContainerName
)

// Spark configuration keys the plugin writes.
const (
	confExecutorPodNamePrefix = "spark.kubernetes.executor.podNamePrefix"
	confDriverStartTime       = "spark.kubernetes.driverEnv.FLYTE_START_TIME"
	confPySparkPython         = "spark.pyspark.python"
	confPySparkDriverPython   = "spark.pyspark.driver.python"
	confDriverCores           = "spark.driver.cores"
	confDriverMemory          = "spark.driver.memory"
	confExecutorCores         = "spark.executor.cores"
	confExecutorMemory        = "spark.executor.memory"
	confExecutorInstances     = "spark.executor.instances"
	confBatchScheduler        = "spark.batchScheduler"
)

// EnvMaxAttempts tells the driver and executors how many attempts the task has.
const EnvMaxAttempts = "FLYTE_MAX_ATTEMPTS"

// minPodTemplateSparkVersion is declared by an application with pod
// templates: the operator refuses templates below Spark 3.0.0, and an unset
// version counts as below it.
const minPodTemplateSparkVersion = "3.0.0"

// submissionFailureRetries: the operator retries a refused submission (a
// quota, say) this often before the application fails, as in Flyte; a failed
// run is retried by the executor's attempts instead.
const submissionFailureRetries int32 = 14

// defaultServiceAccount runs the driver when neither the task nor the
// executor names an account (Flyte's).
const defaultServiceAccount = "spark"

// featureKey is a job's switch of a configured feature:
// spark.flyte.<name>.enabled or spark.flyteorg.<name>.enabled. The dots
// match any character, as in Flyte's pattern.
var featureKey = regexp.MustCompile(`^spark.((flyteorg)|(flyte)).(.+).enabled$`)

// badSpec is the permanent user failure of a task that cannot become a
// SparkApplication.
func badSpec(format string, a ...any) error {
	return &plugin.LaunchError{Err: plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf(format, a...)}}
}

// Job is the task's Spark job: Flyte's form keeps it in the template's
// custom, the typed form in spec.template.config.sparkJob.
func Job(t *task.Task) (*plugins.SparkJob, error) {
	job := &plugins.SparkJob{}
	if t.Form == task.FormFlyte {
		tmpl := &core.TaskTemplate{}
		if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
			return nil, badSpec("the task template cannot be read: %v", err)
		}
		if tmpl.GetCustom() == nil {
			return nil, badSpec("the task template has no custom: a Spark task keeps its SparkJob there")
		}
		b, err := protojson.Marshal(tmpl.GetCustom())
		if err == nil {
			// Unknown fields (the Databricks settings) are ignored, as Flyte does.
			err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, job)
		}
		if err != nil {
			return nil, badSpec("the task template's custom is not a SparkJob: %v", err)
		}
	} else {
		s, ok := t.Config[ConfigKey]
		if !ok {
			return nil, badSpec("spec.template.config.%s is required: the Spark job as JSON, e.g. {\"mainApplicationFile\": \"local:///app/main.py\"}", ConfigKey)
		}
		if err := protojson.Unmarshal([]byte(s), job); err != nil {
			return nil, badSpec("spec.template.config.%s is not a SparkJob: %v", ConfigKey, err)
		}
	}
	if job.GetMainApplicationFile() == "" && job.GetMainClass() == "" {
		return nil, badSpec("the Spark job needs a mainApplicationFile or a mainClass")
	}
	return job, nil
}

// Build is the SparkApplication of attempt tc.Attempt, by the rules of
// Flyte's Spark plugin (the differences are listed in docs/engines/spark.md).
// The driver and executors are the task's pod as the container plugin builds
// it (the driver never interruptible); now is written as the driver's
// FLYTE_START_TIME.
func Build(tc plugin.TaskContext, cfg Config, now time.Time) (*sparkv1beta2.SparkApplication, error) {
	ta := tc.TaskAction
	if ta == nil {
		return nil, fmt.Errorf("no TaskAction in the task context")
	}
	t := tc.Task
	if t == nil {
		var err error
		if t, err = task.FromTaskAction(ta); err != nil {
			return nil, badSpec("%v", err)
		}
		tc.Task = t
	}
	job, err := Job(t)
	if err != nil {
		return nil, err
	}
	driverPodSpec, err := customPodSpec(job.GetDriverPod(), "driverPod")
	if err != nil {
		return nil, err
	}
	executorPodSpec, err := customPodSpec(job.GetExecutorPod(), "executorPod")
	if err != nil {
		return nil, err
	}

	// The pods' metadata is the task's identity, not the template's pod
	// metadata (k8s_pod labels and annotations), as in Flyte.
	et := *t
	et.PodLabels, et.PodAnnotations = nil, nil
	executorTC := tc
	executorTC.Task = &et
	executorPod, err := container.BuildPod(executorTC)
	if err != nil {
		return nil, err
	}
	// The driver runs the task's program: an interruption would fail the
	// whole application.
	dt := et
	dt.Interruptible = false
	driverTC := tc
	driverTC.Task = &dt
	driverPod, err := container.BuildPod(driverTC)
	if err != nil {
		return nil, err
	}

	name := container.PodName(ta.Name, tc.Attempt)
	conf := sparkConf(job, cfg, name, now)
	sa := serviceAccount(t, tc.Settings)
	maxAttempts := strconv.Itoa(int(t.MaxAttempts()))

	driver, err := sparkPodSpec(driverPod, driverPodSpec, DriverContainerName, sa, maxAttempts, cfg.EnablePodTemplate)
	if err != nil {
		return nil, err
	}
	executor, err := sparkPodSpec(executorPod, executorPodSpec, ExecutorContainerName, sa, maxAttempts, cfg.EnablePodTemplate)
	if err != nil {
		return nil, err
	}
	if driver.Template != nil {
		conf[sparkcommon.SparkKubernetesDriverPodTemplateContainerName] = DriverContainerName
	}
	if executor.Template != nil {
		conf[sparkcommon.SparkKubernetesExecutorPodTemplateContainerName] = ExecutorContainerName
	}
	// The driver always runs as the resolved account; the executors only
	// with pod templates (the operator gives them the driver's otherwise).
	driver.ServiceAccount = &sa

	d := sparkv1beta2.DriverSpec{SparkPodSpec: *driver}
	if cores, ok := nonZeroInt32(conf[confDriverCores]); ok {
		d.Cores = &cores
	}
	d.Memory = nonEmpty(conf[confDriverMemory])
	e := sparkv1beta2.ExecutorSpec{SparkPodSpec: *executor}
	if cores, ok := nonZeroInt32(conf[confExecutorCores]); ok {
		e.Cores = &cores
	}
	if n, ok := nonZeroInt32(conf[confExecutorInstances]); ok {
		e.Instances = &n
	}
	e.Memory = nonEmpty(conf[confExecutorMemory])

	primary := &executorPod.Spec.Containers[primaryIndex(executorPod)]
	retries := submissionFailureRetries
	app := &sparkv1beta2.SparkApplication{
		TypeMeta: metav1.TypeMeta{APIVersion: sparkv1beta2.SchemeGroupVersion.String(), Kind: "SparkApplication"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ta.Namespace,
			Labels:          maps.Clone(executorPod.Labels),
			Annotations:     podAnnotations(executorPod),
			OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(ta)},
		},
		Spec: sparkv1beta2.SparkApplicationSpec{
			Type:       applicationType(job.GetApplicationType()),
			Image:      new(primary.Image),
			Arguments:  slices.Clone(primary.Args),
			Driver:     d,
			Executor:   e,
			SparkConf:  conf,
			HadoopConf: job.GetHadoopConf(),
			RestartPolicy: sparkv1beta2.RestartPolicy{
				Type:                       sparkv1beta2.RestartPolicyOnFailure,
				OnSubmissionFailureRetries: &retries,
			},
			MainApplicationFile: nonEmpty(job.GetMainApplicationFile()),
			MainClass:           nonEmpty(job.GetMainClass()),
		},
	}
	if d.Template != nil || e.Template != nil {
		app.Spec.SparkVersion = minPodTemplateSparkVersion
	}
	if v, ok := conf[confBatchScheduler]; ok {
		app.Spec.BatchScheduler = &v
	}
	return app, nil
}

// sparkConf is the application's Spark configuration: the configured
// defaults, the job's executor path, the job's own (a feature switch turned
// on brings its feature's configuration instead), the CPU limits the
// requests imply, the executors' pod name prefix and the driver's start time
// (milliseconds since the epoch).
func sparkConf(job *plugins.SparkJob, cfg Config, name string, now time.Time) map[string]string {
	conf := maps.Clone(cfg.DefaultSparkConfig)
	if conf == nil {
		conf = map[string]string{}
	}
	if p := job.GetExecutorPath(); p != "" {
		conf[confPySparkPython] = p
		conf[confPySparkDriverPython] = p
	}
	// The features first, then the job's other keys: a key the job sets
	// wins over a feature that sets it too (Flyte applies them in map
	// order, so either may win there).
	keys := slices.Sorted(maps.Keys(job.GetSparkConf()))
	for _, k := range keys {
		if featureKey.MatchString(k) {
			addFeature(conf, cfg.Features, k, job.GetSparkConf()[k])
		}
	}
	for _, k := range keys {
		if !featureKey.MatchString(k) {
			conf[k] = job.GetSparkConf()[k]
		}
	}
	// A limit follows the request (spark.kubernetes.*.request.cores before
	// spark.*.cores) unless set.
	for _, r := range []struct{ limit, request, cores string }{
		{sparkcommon.SparkKubernetesDriverLimitCores, sparkcommon.SparkKubernetesDriverRequestCores, confDriverCores},
		{sparkcommon.SparkKubernetesExecutorLimitCores, sparkcommon.SparkKubernetesExecutorRequestCores, confExecutorCores},
	} {
		if conf[r.limit] != "" {
			continue
		}
		if v := conf[r.request]; v != "" {
			conf[r.limit] = v
		} else if v := conf[r.cores]; v != "" {
			conf[r.limit] = v
		}
	}
	conf[confExecutorPodNamePrefix] = name
	conf[confDriverStartTime] = strconv.FormatInt(now.UnixMilli(), 10)
	return conf
}

// addFeature applies a feature switch: "true" (any case, spaces around)
// brings the first feature of that name's configuration; anything else, or a
// feature not configured, is kept as a plain key.
func addFeature(conf map[string]string, features []Feature, key, value string) {
	if strings.ToLower(strings.TrimSpace(value)) != "true" {
		conf[key] = value
		return
	}
	m := featureKey.FindStringSubmatch(key)
	name := m[len(m)-1]
	for _, f := range features {
		if f.Name == name {
			maps.Copy(conf, f.SparkConfig)
			return
		}
	}
	conf[key] = value
}

// serviceAccount runs the driver: the task's, else the executor's default,
// else "spark".
func serviceAccount(t *task.Task, s plugin.Settings) string {
	switch {
	case t.ServiceAccount != "":
		return t.ServiceAccount
	case s.DefaultServiceAccount != "":
		return s.DefaultServiceAccount
	}
	return defaultServiceAccount
}

// customPodSpec decodes the job's driver or executor pod spec, if any.
func customPodSpec(p *core.K8SPod, field string) (*corev1.PodSpec, error) {
	if p.GetPodSpec() == nil {
		return nil, nil
	}
	b, err := protojson.Marshal(p.GetPodSpec())
	if err != nil {
		return nil, badSpec("the Spark job's %s.podSpec: %v", field, err)
	}
	spec, err := task.DecodePodSpec(b, "the Spark job's "+field+".podSpec")
	if err != nil {
		return nil, badSpec("%v", err)
	}
	return spec, nil
}

// primaryIndex is the index of the task's container in a pod BuildPod built.
func primaryIndex(pod *corev1.Pod) int {
	name := pod.Annotations[container.AnnotationPrimaryContainer]
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			return i
		}
	}
	return 0
}

// podAnnotations are the pod's annotations without the primary container's
// name: the operator's pods name their own containers.
func podAnnotations(pod *corev1.Pod) map[string]string {
	out := maps.Clone(pod.Annotations)
	delete(out, container.AnnotationPrimaryContainer)
	if len(out) == 0 {
		return nil
	}
	return out
}

// sparkPodSpec is the driver's or executors' part of the application, from
// the pod the task would run as: its container's image and environment (and
// the number of attempts), the pod's placement and metadata; with pod
// templates, the pod spec itself (its task container renamed as the
// operator names it, without the command, which the operator sets) or the
// job's own pod spec for the role, as it is.
func sparkPodSpec(pod *corev1.Pod, custom *corev1.PodSpec, containerName, sa, maxAttempts string, templates bool) (*sparkv1beta2.SparkPodSpec, error) {
	idx := primaryIndex(pod)
	c := pod.Spec.Containers[idx]
	env := make([]corev1.EnvVar, 0, len(c.Env)+1)
	for _, e := range c.Env {
		env = append(env, *e.DeepCopy())
	}
	env = append(env, corev1.EnvVar{Name: EnvMaxAttempts, Value: maxAttempts})
	spec := pod.Spec.DeepCopy()
	out := &sparkv1beta2.SparkPodSpec{
		Affinity:           spec.Affinity,
		Annotations:        podAnnotations(pod),
		Labels:             maps.Clone(pod.Labels),
		Env:                env,
		Image:              new(c.Image),
		PodSecurityContext: spec.SecurityContext,
		DNSConfig:          spec.DNSConfig,
		Tolerations:        spec.Tolerations,
		SchedulerName:      new(spec.SchedulerName),
		NodeSelector:       spec.NodeSelector,
		HostNetwork:        new(spec.HostNetwork),
	}
	if !templates {
		return out, nil
	}
	tmpl := pod.Spec.DeepCopy()
	if custom != nil {
		tmpl = custom.DeepCopy()
		if tmpl.EnableServiceLinks == nil {
			tmpl.EnableServiceLinks = pod.Spec.EnableServiceLinks
		}
	} else {
		tmpl.Containers[idx].Name = containerName
		tmpl.Containers[idx].Command = nil
		tmpl.Containers[idx].Args = nil
	}
	out.Template = &corev1.PodTemplateSpec{Spec: *tmpl}
	out.ServiceAccount = &sa
	return out, nil
}

// applicationType is the operator's name of the job's application type.
func applicationType(t plugins.SparkApplication_Type) sparkv1beta2.SparkApplicationType {
	switch t {
	case plugins.SparkApplication_JAVA:
		return sparkv1beta2.SparkApplicationTypeJava
	case plugins.SparkApplication_SCALA:
		return sparkv1beta2.SparkApplicationTypeScala
	case plugins.SparkApplication_R:
		return sparkv1beta2.SparkApplicationTypeR
	}
	return sparkv1beta2.SparkApplicationTypePython
}

// nonZeroInt32 reads a Spark setting as a count: a decimal int32 other
// than 0 (a zero or unreadable value leaves the operator's default).
func nonZeroInt32(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return int32(n), true
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
