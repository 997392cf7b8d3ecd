package v1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// The API server takes every value of a status integer that its Go type
// (Flyte's) holds, and refuses the others: nothing it stores fails the
// executor's decode, and nothing Flyte's actions service writes is refused.
func TestStatusIntegersAdmitExactlyTheirGoRange(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ta := minimal(ns, "bounds")
	if err := env.Client.Create(ctx, ta); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		value any
		ok    bool
	}{
		{"pluginStateVersion", 255, true}, {"pluginStateVersion", 256, false}, {"pluginStateVersion", -1, false},
		{"attempts", 4294967295, true}, {"attempts", 4294967296, false}, {"attempts", -1, false},
		{"systemFailures", 4294967295, true}, {"systemFailures", -1, false},
		{"pluginPhaseVersion", 4294967295, true}, {"pluginPhaseVersion", 4294967296, false},
		{"cacheStatus", -2147483648, true}, {"cacheStatus", 2147483647, true}, {"cacheStatus", 2147483648, false},
	} {
		t.Run(fmt.Sprintf("%s=%v", tc.field, tc.value), func(t *testing.T) {
			patch, _ := json.Marshal(map[string]any{"status": map[string]any{tc.field: tc.value}})
			err := env.Client.Status().Patch(ctx, ta.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && (err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("status.%s = %v: %v, want a refusal naming it", tc.field, tc.value, err)
			case !tc.ok:
				return
			}
			got := &flytev1.TaskAction{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ta), got); err != nil {
				t.Fatal(err)
			}
			if got.DecodeError() != nil {
				t.Errorf("stored and read back: %v", got.DecodeError())
			}
		})
	}
}

// A quantity of the typed container is admitted when the executor can read
// it, and refused, naming it, when its exponent or length is out of bounds
// or it is not a quantity.
func TestTypedQuantitiesAdmittedAsTheExecutorReadsThem(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for i, tc := range []struct {
		cpu any
		ok  bool
	}{
		{"500m", true}, {"1e99", true}, {"1E-99", true}, {int64(5), true}, {json.Number("9223372036854775807"), true}, {strings.Repeat("9", 64), true},
		{"1e2147483648", false}, {"1e-2147483648", false}, {"1e100", false}, {"lots", false}, {strings.Repeat("9", 65), false},
		{json.Number("1e100"), false}, {json.Number("9223372036854775808"), false},
	} {
		t.Run(fmt.Sprint(tc.cpu), func(t *testing.T) {
			u := unstructuredOf(t, minimal(ns, fmt.Sprintf("q-%d", i)))
			limits := map[string]any{"cpu": tc.cpu}
			res := map[string]any{"limits": limits}
			_ = unstructured.SetNestedField(u.Object, res, "spec", "template", "container", "resources")
			_ = unstructured.SetNestedField(u.Object, []any{map[string]any{"name": "CPU", "valueFrom": map[string]any{
				"resourceFieldRef": map[string]any{"resource": "limits.cpu", "divisor": tc.cpu}}}}, "spec", "template", "container", "env")
			err := env.Client.Create(ctx, u)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "spec.template.container.resources.limits.cpu") ||
				!strings.Contains(err.Error(), "spec.template.container.env[0].valueFrom.resourceFieldRef.divisor")):
				t.Fatalf("created or refused without naming both quantities: %v", err)
			case !tc.ok:
				return
			}
			got := &flytev1.TaskAction{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
				t.Fatal(err)
			}
			if got.DecodeError() != nil {
				t.Errorf("stored and read back: %v", got.DecodeError())
			}
		})
	}
}

func unstructuredOf(t *testing.T, ta *flytev1.TaskAction) *unstructured.Unstructured {
	t.Helper()
	ta.APIVersion, ta.Kind = flytev1.GroupVersion.String(), "TaskAction"
	b, err := json.Marshal(ta)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}
