// Package hostile holds the hostile values of the bad-input matrix
// (test/faults/badinput), as the matrix stores them and as the fuzz targets
// of the decoders, the pod build and the admission webhook take them for
// their seed corpora, so that each fuzz target starts from every one of them.
package hostile

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// HugeExponent is a quantity the CRD's pattern used to admit whose parse
// (resource.ParseQuantity) expands 10^(2^31) and never returns.
const HugeExponent = "1e2147483648"

// Quantities are quantity texts that no parse may take long over, none of
// them a quantity the executor accepts.
var Quantities = []string{
	HugeExponent, "1e-2147483648", "-1E2147483647", "1e100000000", "1e100", "lots", "", "1e", "1Ki5",
	strings.Repeat("9", 4096), "0." + strings.Repeat("0", 4096) + "1",
}

// Document is a TaskAction as a client writes it (JSON).
type Document struct {
	Name string
	JSON []byte
}

// TaskAction is a valid TaskAction of the typed form, as a JSON object, the
// base the documents below change.
func TaskAction(ns, name string) map[string]any {
	return map[string]any{
		"apiVersion": "flyte.org/v1", "kind": "TaskAction",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"runName": "badinput", "project": "proj", "domain": "dev", "actionName": trim(name, 30), "taskType": "container",
			"inputUri": "s3://b/in/" + name + "/inputs.pb", "runOutputBase": "s3://b/badinput",
			"template": map[string]any{"id": map[string]any{"name": "t", "version": "v1"},
				"container": map[string]any{"image": "busybox", "command": []any{"true"}}},
		},
	}
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Template is the typed template of a TaskAction made by TaskAction.
func Template(ta map[string]any) map[string]any {
	return ta["spec"].(map[string]any)["template"].(map[string]any)
}

// Container is the typed container of a TaskAction made by TaskAction.
func Container(ta map[string]any) map[string]any {
	return Template(ta)["container"].(map[string]any)
}

// PodTemplateSpec is a typed podTemplate.spec whose container asks for cpu q.
func PodTemplateSpec(q any) map[string]any {
	return map[string]any{"containers": []any{map[string]any{"name": "task", "image": "busybox",
		"resources": map[string]any{"limits": map[string]any{"cpu": q}}}}}
}

// FlyteTemplate is Flyte's serialized core.TaskTemplate of a python task
// whose container asks for cpu q.
func FlyteTemplate(q string) []byte {
	return marshal(&core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "t", Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{Timeout: durationpb.New(time.Hour), Retries: &core.RetryStrategy{Retries: 1}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "busybox", Command: []string{"true"},
			Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: q}}},
		}},
	})
}

// FlyteSharedMemoryTemplate is FlyteTemplate("1") with a shared memory of size q.
func FlyteSharedMemoryTemplate(q string) []byte {
	t := &core.TaskTemplate{}
	if err := proto.Unmarshal(FlyteTemplate("1"), t); err != nil {
		panic(err)
	}
	t.ExtendedResources = &core.ExtendedResources{SharedMemory: &core.SharedMemory{MountPath: "/dev/shm", MountName: "shm", SizeLimit: q}}
	return marshal(t)
}

// FlytePodTemplate is Flyte's serialized core.TaskTemplate of a pod task
// whose primary container asks for cpu q in its pod spec.
func FlytePodTemplate(q string) []byte {
	spec, err := structpb.NewStruct(PodTemplateSpec(q))
	if err != nil {
		panic(err)
	}
	return marshal(&core.TaskTemplate{
		Id:     &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "t", Version: "v1"},
		Type:   "python",
		Config: map[string]string{"primary_container_name": "task"},
		Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: spec}},
	})
}

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// FlyteTaskAction is a TaskAction of Flyte's form carrying template.
func FlyteTaskAction(ns, name string, template []byte) map[string]any {
	ta := TaskAction(ns, name)
	spec := ta["spec"].(map[string]any)
	delete(spec, "template")
	spec["taskTemplate"] = base64.StdEncoding.EncodeToString(template)
	return ta
}

// Documents are the hostile TaskActions of the matrix (and more of their
// kind), each a valid TaskAction with one hostile value, status included as
// a client with write access to the status could store it.
func Documents() []Document {
	var docs []Document
	add := func(name string, ta map[string]any) {
		b, err := json.Marshal(ta)
		if err != nil {
			panic(err)
		}
		docs = append(docs, Document{Name: name, JSON: b})
	}
	typed := func(name string, change func(ta map[string]any)) {
		ta := TaskAction("ns", name)
		change(ta)
		add(name, ta)
	}
	for i, q := range Quantities {
		typed(fmt.Sprintf("typed-resources-%d", i), func(ta map[string]any) {
			Container(ta)["resources"] = map[string]any{"limits": map[string]any{"cpu": q}, "requests": map[string]any{"memory": q}}
		})
		typed(fmt.Sprintf("typed-divisor-%d", i), func(ta map[string]any) {
			Container(ta)["env"] = []any{map[string]any{"name": "CPU", "valueFrom": map[string]any{
				"resourceFieldRef": map[string]any{"resource": "limits.cpu", "divisor": q}}}}
		})
		typed(fmt.Sprintf("podtemplate-%d", i), func(ta map[string]any) {
			Template(ta)["podTemplate"] = map[string]any{"spec": PodTemplateSpec(q)}
		})
		add(fmt.Sprintf("flyte-resources-%d", i), FlyteTaskAction("ns", "flyte", FlyteTemplate(q)))
		add(fmt.Sprintf("flyte-shared-memory-%d", i), FlyteTaskAction("ns", "flyte", FlyteSharedMemoryTemplate(q)))
		add(fmt.Sprintf("flyte-pod-%d", i), FlyteTaskAction("ns", "flyte", FlytePodTemplate(q)))
	}
	for _, n := range []any{1e300, -1e300, json.Number("1e2147483648")} {
		typed(fmt.Sprintf("typed-resources-number-%v", n), func(ta map[string]any) {
			Container(ta)["resources"] = map[string]any{"limits": map[string]any{"cpu": n}}
		})
	}
	for name, status := range map[string]map[string]any{
		"status-plugin-state-version-300": {"pluginStateVersion": 300},
		"status-attempts-negative":        {"attempts": -1},
		"status-system-failures-huge":     {"systemFailures": json.Number("1e40")},
		"status-cache-status-string":      {"cacheStatus": "HIT"},
		"status-observed-generation":      {"conditions": []any{map[string]any{"type": "Failed", "status": "True", "observedGeneration": 1e30}}},
	} {
		typed(name, func(ta map[string]any) { ta["status"] = status })
	}
	for _, to := range []string{"-5s", "2d", "1ns", "99999999999h", "1000000h", strings.Repeat("1", 64) + "h"} {
		typed("timeout-"+to, func(ta map[string]any) { Template(ta)["timeout"] = to })
	}
	for _, r := range []any{1_000_000, -1, json.Number("1e40"), "3"} {
		typed(fmt.Sprintf("retries-%v", r), func(ta map[string]any) { Template(ta)["retries"] = r })
	}
	typed("podtemplate-mistyped", func(ta map[string]any) {
		Template(ta)["podTemplate"] = map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "x", "image": 5}}, "nodeSelectr": map[string]any{}}}
	})
	typed("podtemplate-containers-object", func(ta map[string]any) {
		Template(ta)["podTemplate"] = map[string]any{"spec": map[string]any{"containers": map[string]any{"name": "x"}}}
	})
	typed("unicode-env", func(ta map[string]any) {
		ta["spec"].(map[string]any)["envVars"] = map[string]any{"BIG": strings.Repeat("ü日😀\u200b", 1000)}
	})
	typed("args-many", func(ta map[string]any) {
		args := make([]any, 500)
		for i := range args {
			args[i] = fmt.Sprintf("arg-%d-{{.input}}-{{.Inputs.x}}", i)
		}
		Container(ta)["args"] = args
	})
	typed("spec-mistyped", func(ta map[string]any) {
		ta["spec"].(map[string]any)["runName"] = 5
		ta["spec"].(map[string]any)["envVars"] = []any{"x"}
	})
	for name, tmpl := range map[string][]byte{
		"template-bytes-undecodable": {0, 1, 2, 3, 4, 5},
		"template-bytes-slash-plus":  {0x0a, 0xff, 0xfe, 0xfb, 0x3e, 0xff},
		"template-bytes-json":        []byte(`{"container":{"image":"x"}}`),
	} {
		add(name, FlyteTaskAction("ns", name, tmpl))
	}
	return docs
}

// Bound is how long one input of a fuzz target may take: generous, so that
// a loaded 2-core machine does not make it flake (the inputs take micro- to
// milliseconds), and far below what an unbounded parse takes (forever).
const Bound = time.Second

// Within runs f and fails t when it has not returned within Bound, or
// panicked; it does not wait for an f that overruns.
func Within(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
				return
			}
			done <- nil
		}()
		f()
	}()
	timer := time.NewTimer(Bound)
	defer timer.Stop()
	select {
	case r := <-done:
		if r != nil {
			t.Fatalf("%s: %v", what, r)
		}
	case <-timer.C:
		t.Fatalf("%s took more than %v", what, Bound)
	}
}
