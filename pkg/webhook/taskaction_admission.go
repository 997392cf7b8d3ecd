package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/controller"
)

// TaskActionFinalizer adds the executor's finalizer when a TaskAction is
// created, so that the reconciler does not spend a write on it. Its
// failurePolicy is Ignore: without the webhook a create still succeeds and
// the reconciler adds the finalizer itself.
type TaskActionFinalizer struct{}

// Handle implements admission.Handler. It reads only the metadata, so a
// spec the typed API cannot decode is still admitted here (the validating
// webhook and the reconciler report it).
func (TaskActionFinalizer) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode TaskAction metadata: %w", err))
	}
	if slices.Contains(obj.Metadata.Finalizers, controller.Finalizer) {
		return admission.Allowed("finalizer present")
	}
	if len(obj.Metadata.Finalizers) == 0 {
		return admission.Patched("finalizer added",
			jsonpatch.NewOperation("add", "/metadata/finalizers", []string{controller.Finalizer}))
	}
	return admission.Patched("finalizer added",
		jsonpatch.NewOperation("add", "/metadata/finalizers/-", controller.Finalizer))
}

// TaskActionValidator refuses TaskActions whose typed template the
// executor could not use, with one message per field, at `kubectl apply`.
// It checks what the CRD's schema and CEL rules cannot: Go durations,
// resource quantities, the schemaless pod template. Its failurePolicy is
// Ignore; the reconciler checks the same again.
type TaskActionValidator struct {
	// Extra, if set, is called with the decoded TaskAction once the checks
	// here pass (the decode of Flyte's template bytes plugs in here).
	Extra func(*flytev1.TaskAction) error
}

// Handle implements admission.Handler.
func (v TaskActionValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	ta, errs, warnings := CheckTaskAction(req.Object.Raw)
	if len(errs) == 0 && v.Extra != nil {
		if err := v.Extra(ta); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec"), "", err.Error()))
		}
	}
	if len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// CheckTaskAction decodes a TaskAction from its JSON, field by field where
// the typed decode would only say that something failed. It returns the
// decoded object when there are no errors. Warnings are fields the pod spec
// does not know (Kubernetes would drop them).
func CheckTaskAction(raw []byte) (*flytev1.TaskAction, field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	var doc struct {
		Spec struct {
			TaskTemplate *struct {
				Timeout   json.RawMessage `json:"timeout"`
				Container *struct {
					Resources json.RawMessage `json:"resources"`
				} `json:"container"`
				PodTemplate *struct {
					Spec json.RawMessage `json:"spec"`
				} `json:"podTemplate"`
			} `json:"taskTemplate"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), "", "not a TaskAction: "+err.Error())}, nil
	}
	tpl := field.NewPath("spec", "taskTemplate")
	if tt := doc.Spec.TaskTemplate; tt != nil {
		if len(tt.Timeout) > 0 && string(tt.Timeout) != "null" {
			errs = append(errs, checkTimeout(tpl.Child("timeout"), tt.Timeout)...)
		}
		if c := tt.Container; c != nil && len(c.Resources) > 0 && string(c.Resources) != "null" {
			var rr corev1.ResourceRequirements
			if err := json.Unmarshal(c.Resources, &rr); err != nil {
				errs = append(errs, field.Invalid(tpl.Child("container", "resources"), string(c.Resources), decodeReason(err)))
			}
		}
		if pt := tt.PodTemplate; pt != nil && len(pt.Spec) > 0 && string(pt.Spec) != "null" {
			p := tpl.Child("podTemplate", "spec")
			var spec corev1.PodSpec
			strict, err := sigsjson.UnmarshalStrict(pt.Spec, &spec)
			if err != nil {
				errs = append(errs, field.Invalid(p, "", "not a pod spec: "+decodeReason(err)))
			}
			for _, e := range strict {
				warnings = append(warnings, fmt.Sprintf("%s: %v (Kubernetes ignores it)", p, e))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs, warnings
	}
	ta := &flytev1.TaskAction{}
	if err := json.Unmarshal(raw, ta); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), "", "does not decode: "+decodeReason(err))}, warnings
	}
	return ta, nil, warnings
}

func checkTimeout(p *field.Path, raw json.RawMessage) field.ErrorList {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return field.ErrorList{field.Invalid(p, string(raw), "must be a string in Go duration syntax, such as 90s, 10m or 1h30m")}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return field.ErrorList{field.Invalid(p, s, "not a duration: use Go syntax such as 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no d)")}
	}
	if d < 0 {
		return field.ErrorList{field.Invalid(p, s, "must not be negative")}
	}
	return nil
}

// decodeReason is a JSON decode error without Go type names where a field
// path says more.
func decodeReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: a %s where a %s is expected", te.Field, te.Value, strings.TrimPrefix(te.Type.String(), "*"))
		}
		return fmt.Sprintf("a %s where a %s is expected", te.Value, strings.TrimPrefix(te.Type.String(), "*"))
	}
	return err.Error()
}
