package kubeflow

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
)

// The golden facts under testdata/golden: for each case, <case>.template.json
// is a task template (protojson) and taskaction.yaml the TaskAction Flyte's
// actions service would apply for it; <case>.flyte.yaml is the object Flyte's
// own plugin created for them, first attempt. A throwaway program, built
// outside this repository against flyteorg/flyte at
// 6fadb90d65af26f4db908ec1c5f5af546a3e4299 and never committed, parsed the
// same files into Flyte's types, built the task execution context with
// Flyte's executor (executor/pkg/plugin.NewTaskExecutionContext, its k8s
// plugin configuration set as plugintest.FlyteSettings), ran the kfoperators
// plugin registered for the task type through Flyte's executor's
// PluginManager.Handle over a fake client, and wrote the object its Create
// received as YAML (sigs.k8s.io/yaml). It also printed the SHA-256 of the
// deterministic wire form of each template it parsed (goldenSHA): equal
// digests show that both sides build from the very same template.
//
// <case>.yaml is this plugin's object; -update rewrites it (review it then).
// The test checks that it is Flyte's once the deliberate differences
// (asFlyte, each listed in docs/engines/kubeflow.md) are undone.
var update = flag.Bool("update", false, "rewrite this plugin's objects under testdata/golden")

var goldenSHA = map[string]string{
	"mpi":                   "a4ed05d2bdb6bbddaa58f40de90b4875d0050c0867344649d8b8a4081fe1f358",
	"mpi-v0":                "ed53b354d44e263a45f6dbd9d3ddc8734f53970f2811d9ee0c40d90c1b42366a",
	"pytorch-elastic":       "6e32dd877128cf056e5b0e9912365e440101a34ba81812e2a5cae6741754d8c6",
	"pytorch-master-worker": "86b2b85209469d5324e59a34347de77519578299236cae26f4137854181eb268",
	"pytorch-v0-pod":        "ad076adef3966882fe0ac1aa86e4401c039304d5a3cf632a2d386478ccba36dc",
	"tensorflow":            "2bd10e32c2ed7ea301e2cf02e8d58f09e69d3477d3cffa60abf165401fd81796",
	"tensorflow-v0":         "62f0ce8ed8561eb7f1ebd3f4c07bab5e50c49271ba8a0ffbd9698d1b83fc3043",
}

// goldenTaskContext is the first attempt of the golden TaskAction running
// the template of case name.
func goldenTaskContext(t *testing.T, name string) plugin.TaskContext {
	t.Helper()
	dir := filepath.Join("testdata", "golden")
	raw, err := os.ReadFile(filepath.Join(dir, name+".template.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &core.TaskTemplate{}
	if err := protojson.Unmarshal(raw, tmpl); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != goldenSHA[name] {
		t.Fatalf("%s: the template's wire form is not the one Flyte's plugin was given (sha256 %x, want %s)", name, sum, goldenSHA[name])
	}
	taYAML, err := os.ReadFile(filepath.Join(dir, "taskaction.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ta := &flytev1.TaskAction{}
	if err := yaml.Unmarshal(taYAML, ta); err != nil {
		t.Fatal(err)
	}
	ta.Spec.TaskTemplate, ta.Spec.TaskType = b, tmpl.GetType()
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugintest.FlyteSettings()}
}

func TestGoldenJobs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(goldenSHA) {
		t.Fatalf("%d templates, %d recorded digests", len(files), len(goldenSHA))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".template.json")
		t.Run(name, func(t *testing.T) {
			tc := goldenTaskContext(t, name)
			p, err := NewPlugin(tc.Task.Type, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			obj, err := p.Build(tc)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				plugintest.WriteFile(t, path, ours)
			} else if want, err := os.ReadFile(path); err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			} else if string(want) != string(ours) {
				t.Errorf("the job differs from %s:\n%s", path, plugintest.LineDiff(string(want), string(ours)))
			}

			flyteYAML, err := os.ReadFile(filepath.Join("testdata", "golden", name+".flyte.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var flyte client.Object
			switch obj.(type) {
			case *kubeflowv1.PyTorchJob:
				flyte = &kubeflowv1.PyTorchJob{}
			case *kubeflowv1.TFJob:
				flyte = &kubeflowv1.TFJob{}
			case *kubeflowv1.MPIJob:
				flyte = &kubeflowv1.MPIJob{}
			}
			if err := yaml.UnmarshalStrict(flyteYAML, flyte); err != nil {
				t.Fatal(err)
			}
			got, want := canonical(t, asFlyte(obj, tc.Task)), canonical(t, flyte)
			if got != want {
				t.Errorf("the job, its deliberate differences undone, is not Flyte's:\n%s", plugintest.LineDiff(want, got))
			}
		})
	}
}

// asFlyte is obj with every deliberate difference from Flyte's object
// undone (docs/engines/kubeflow.md lists them with their reasons).
func asFlyte(obj client.Object, t *task.Task) client.Object {
	obj = obj.DeepCopyObject().(client.Object)
	// The executor's owner reference also blocks the owner's deletion.
	refs := obj.GetOwnerReferences()
	for i := range refs {
		refs[i].BlockOwnerDeletion = nil
	}
	obj.SetOwnerReferences(refs)
	for _, rs := range replicaSpecs(obj) {
		podAsFlyte(&rs.Template.Spec, t)
	}
	// Flyte writes one slot per worker for version 1, whatever the task asks.
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
		panic(err)
	}
	if j, ok := obj.(*kubeflowv1.MPIJob); ok && tmpl.GetTaskTypeVersion() == 1 {
		one := int32(1)
		j.Spec.SlotsPerWorker = &one
	}
	return obj
}

// podAsFlyte undoes, in a replica's pod, the container plugin's differences
// from Flyte's pod (docs/flyte-compat.md, "The pod").
func podAsFlyte(spec *corev1.PodSpec, t *task.Task) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		isPrimary := c.Name == kubeflowv1.PyTorchJobDefaultContainerName || c.Name == kubeflowv1.TFJobDefaultContainerName ||
			c.Name == kubeflowv1.MPIJobDefaultContainerName
		if !isPrimary {
			// Flyte writes zero CPU and memory into the other containers.
			for _, l := range []*corev1.ResourceList{&c.Resources.Requests, &c.Resources.Limits} {
				if *l == nil {
					*l = corev1.ResourceList{}
				}
				for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if _, ok := (*l)[n]; !ok {
						(*l)[n] = resource.MustParse("0")
					}
				}
			}
		} else if t.PodSpec != nil && t.Container == nil {
			// Flyte sets the termination message policy for container targets only.
			c.TerminationMessagePolicy = ""
		}
	}
	for i := range spec.Volumes {
		// Flyte writes a zero size limit for shared memory without a size.
		if ed := spec.Volumes[i].EmptyDir; ed != nil && ed.Medium == corev1.StorageMediumMemory && ed.SizeLimit == nil {
			zero := resource.MustParse("0")
			ed.SizeLimit = &zero
		}
	}
}

func replicaSpecs(obj client.Object) map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec {
	switch j := obj.(type) {
	case *kubeflowv1.PyTorchJob:
		return j.Spec.PyTorchReplicaSpecs
	case *kubeflowv1.TFJob:
		return j.Spec.TFReplicaSpecs
	case *kubeflowv1.MPIJob:
		return j.Spec.MPIReplicaSpecs
	}
	return nil
}

// canonical is obj's YAML with every container's environment sorted by name:
// Flyte adds the run's and the default variables in Go's map order, which
// changes from run to run.
func canonical(t *testing.T, obj client.Object) string {
	t.Helper()
	obj = obj.DeepCopyObject().(client.Object)
	for _, rs := range replicaSpecs(obj) {
		for _, cs := range [][]corev1.Container{rs.Template.Spec.InitContainers, rs.Template.Spec.Containers} {
			for i := range cs {
				sort.SliceStable(cs[i].Env, func(a, b int) bool { return cs[i].Env[a].Name < cs[i].Env[b].Name })
			}
		}
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
