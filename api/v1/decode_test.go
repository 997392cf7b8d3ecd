package v1_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// stored is a TaskAction as the API server returns it, with extra JSON
// spliced into its template's container and its status.
func stored(name, container, status string) string {
	return `{"apiVersion":"flyte.org/v1","kind":"TaskAction",
	  "metadata":{"name":"` + name + `","namespace":"ns","uid":"u-` + name + `","resourceVersion":"7","finalizers":["flyte.org/finalizer"]},
	  "spec":{"runName":"r","project":"p","domain":"d","actionName":"` + name + `","taskType":"container",
	    "template":{"id":{"name":"t"},"container":{"image":"busybox"` + container + `}}},
	  "status":{"attempts":2,"conditions":[{"type":"Failed","status":"True","reason":"InvalidSpec","message":"m","lastTransitionTime":"2024-01-01T00:00:00Z"}]` + status + `}}`
}

func decodeErrorPaths(ta *flytev1.TaskAction) []string {
	var de *flytev1.DecodeError
	if !errors.As(ta.DecodeError(), &de) {
		return nil
	}
	var paths []string
	for _, f := range de.Fields {
		paths = append(paths, f.Path)
	}
	return paths
}

// The values that stopped the executor for everyone (a quantity whose
// exponent never finishes expanding, a status integer its Go type cannot
// hold, a quantity that is not one) decode: the object keeps its metadata
// and every other value, and names what could not be decoded.
func TestDecodeKeepsTheObjectAndNamesWhatDoesNotDecode(t *testing.T) {
	for _, tc := range []struct {
		name, container, status string
		paths                   []string
		reason                  string
	}{
		{name: "huge-exponent", container: `,"resources":{"limits":{"cpu":"1e2147483648","memory":"1Gi"}}`,
			paths: []string{"spec.template.container.resources.limits.cpu"}, reason: "exponent"},
		{name: "huge-exponent-number", container: `,"resources":{"requests":{"cpu":1e300}}`,
			paths: []string{"spec.template.container.resources.requests.cpu"}, reason: "exponent"},
		{name: "huge-exponent-divisor", container: `,"env":[{"name":"X","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1e-2147483648"}}}]`,
			paths: []string{"spec.template.container.env[0].valueFrom.resourceFieldRef.divisor"}, reason: "exponent"},
		{name: "lots", container: `,"resources":{"limits":{"cpu":"lots"}}`,
			paths: []string{"spec.template.container.resources.limits.cpu"}, reason: "not a Kubernetes quantity"},
		{name: "plugin-state-version", status: `,"pluginStateVersion":300`,
			paths: []string{"status.pluginStateVersion"}, reason: "number 300 does not fit uint8"},
		{name: "attempts", status: `,"pluginStateVersion":300,"systemFailures":-1`,
			paths: []string{"status.pluginStateVersion", "status.systemFailures"}, reason: "number -1 does not fit uint32"},
		{name: "mistyped", container: `,"args":"not a list"`, status: `,"cacheStatus":"HIT"`,
			paths: []string{"spec.template.container.args", "status.cacheStatus"}, reason: "string does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := &flytev1.TaskAction{}
			if err := json.Unmarshal([]byte(stored(tc.name, tc.container, tc.status)), ta); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := strings.Join(decodeErrorPaths(ta), ","); got != strings.Join(tc.paths, ",") {
				t.Errorf("undecodable paths %q, want %q", got, strings.Join(tc.paths, ","))
			}
			if err := ta.DecodeError(); err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("DecodeError() = %v, want it to say %q", err, tc.reason)
			}
			if ta.Name != tc.name || string(ta.UID) != "u-"+tc.name || ta.ResourceVersion != "7" || len(ta.Finalizers) != 1 || ta.Kind != "TaskAction" {
				t.Errorf("metadata not kept: %+v %+v", ta.TypeMeta, ta.ObjectMeta)
			}
			if ta.Spec.RunName != "r" || ta.Spec.Template == nil || ta.Spec.Template.Container == nil || ta.Spec.Template.Container.Image != "busybox" {
				t.Errorf("spec not kept: %+v", ta.Spec)
			}
			if ta.Status.Attempts != 2 || meta.FindStatusCondition(ta.Status.Conditions, flytev1.ConditionFailed) == nil {
				t.Errorf("status not kept: %+v", ta.Status)
			}
			if cp := ta.DeepCopy(); cp.DecodeError() == nil || cp.DecodeError().Error() != ta.DecodeError().Error() {
				t.Errorf("DeepCopy lost the decode error: %v", cp.DecodeError())
			}
			if spec := ta.DecodeErrorUnder("spec"); (spec != nil) != strings.HasPrefix(tc.paths[0], "spec.") {
				t.Errorf("DecodeErrorUnder(spec) = %v", spec)
			}
		})
	}
}

func TestDecodeValidIsPlain(t *testing.T) {
	raw := stored("ok", `,"resources":{"limits":{"cpu":"500m","memory":"1Gi"}}`, `,"pluginStateVersion":255,"attempts":4294967295`)
	ta := &flytev1.TaskAction{}
	if err := json.Unmarshal([]byte(raw), ta); err != nil {
		t.Fatal(err)
	}
	if ta.DecodeError() != nil {
		t.Fatalf("DecodeError() = %v", ta.DecodeError())
	}
	if q := ta.Spec.Template.Container.Resources.Limits["cpu"]; q.String() != "500m" || ta.Status.Attempts != 4294967295 || ta.Status.PluginStateVersion != 255 {
		t.Errorf("decoded %v, attempts %d, version %d", q.String(), ta.Status.Attempts, ta.Status.PluginStateVersion)
	}
	// Decoding again into the same object clears an earlier decode error.
	bad := &flytev1.TaskAction{}
	if err := json.Unmarshal([]byte(stored("bad", "", `,"attempts":-1`)), bad); err != nil || bad.DecodeError() == nil {
		t.Fatalf("bad: %v, %v", err, bad.DecodeError())
	}
	if err := json.Unmarshal([]byte(raw), bad); err != nil || bad.DecodeError() != nil {
		t.Errorf("decoded again: %v, %v", err, bad.DecodeError())
	}
	if err := json.Unmarshal([]byte(`["not","an","object"]`), &flytev1.TaskAction{}); err == nil {
		t.Error("a JSON list decoded as a TaskAction")
	}
}

// The API machinery's decoders (a single object as Get and Patch answer, a
// list, a watch event, an unstructured object converted) all go through the
// TaskAction's decoder: one undecodable object never fails the others.
func TestAPIMachineryDecodersGoThroughIt(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := flytev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	bad := stored("bad", `,"resources":{"limits":{"cpu":"1e2147483648"}}`, `,"pluginStateVersion":300`)
	good := stored("good", "", "")

	obj, _, err := dec.Decode([]byte(bad), nil, nil)
	if err != nil {
		t.Fatalf("single object: %v", err)
	}
	if got := strings.Join(decodeErrorPaths(obj.(*flytev1.TaskAction)), ","); got != "spec.template.container.resources.limits.cpu,status.pluginStateVersion" {
		t.Errorf("single object: %q", got)
	}

	into := &flytev1.TaskAction{}
	if _, _, err := dec.Decode([]byte(bad), nil, into); err != nil || into.DecodeError() == nil || into.Name != "bad" {
		t.Errorf("into an object: %v %v", err, into.DecodeError())
	}

	list := `{"apiVersion":"flyte.org/v1","kind":"TaskActionList","metadata":{"resourceVersion":"9"},"items":[` + good + `,` + bad + `,` + good + `]}`
	obj, _, err = dec.Decode([]byte(list), nil, nil)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	items := obj.(*flytev1.TaskActionList).Items
	if len(items) != 3 || items[0].DecodeError() != nil || items[1].DecodeError() == nil || items[2].DecodeError() != nil || items[1].Name != "bad" {
		t.Errorf("list: %d items", len(items))
	}

	var u map[string]any
	if err := json.Unmarshal([]byte(bad), &u); err != nil {
		t.Fatal(err)
	}
	conv := &flytev1.TaskAction{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, conv); err != nil || conv.DecodeError() == nil || conv.Name != "bad" {
		t.Errorf("from unstructured: %v %v", err, conv.DecodeError())
	}
}
