package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/quantity"
)

// TaskActionAdmission admits a TaskAction's creation in one call from the
// API server: it refuses a TaskAction the executor could not run and adds
// the executor's finalizer to the rest, so that the reconciler does not spend
// a write on it. A second webhook per create would double the API server's
// admission work for every TaskAction; a mutating webhook that runs after
// this one and breaks the spec is still caught by the reconciler, which
// decides the same again. Its failurePolicy is Ignore: without the webhook a
// create succeeds, and the reconciler adds the finalizer and reports an
// invalid spec.
type TaskActionAdmission struct {
	Validator TaskActionValidator
}

// Handle implements admission.Handler.
func (a TaskActionAdmission) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	ta := &flytev1.TaskAction{}
	// The bounded decoder at once: json.Unmarshal would scan the object
	// once more before handing it over.
	if err := ta.UnmarshalJSON(req.Object.Raw); err != nil {
		// Not an object: the API server's own decoding refuses it.
		return admission.Allowed("left to the schema validation")
	}
	verdict := a.Validator.check(ta)
	if !verdict.Allowed {
		return verdict
	}
	if slices.Contains(ta.Finalizers, flytev1.Finalizer) {
		return admission.Allowed("finalizer present").WithWarnings(verdict.Warnings...)
	}
	op := jsonpatch.NewOperation("add", "/metadata/finalizers/-", flytev1.Finalizer)
	if len(ta.Finalizers) == 0 {
		op = jsonpatch.NewOperation("add", "/metadata/finalizers", []string{flytev1.Finalizer})
	}
	return admission.Patched("finalizer added", op).WithWarnings(verdict.Warnings...)
}

// TaskActionValidator refuses, at `kubectl apply`, TaskActions the executor
// could not run. The rules are the executor's own (pkg/task's decode, the
// pod build and the pod-security policy, plugged in as Extra by pkg/setup),
// so admission and the reconciler never disagree; this handler only adds the
// pod-spec fields Kubernetes would drop, as warnings. It serves updates (a
// create is checked by TaskActionAdmission). Its failurePolicy is Ignore: the
// reconciler decides the same again.
type TaskActionValidator struct {
	// Extra is the executor's check of a decoded TaskAction.
	Extra func(*flytev1.TaskAction) error
}

// Handle implements admission.Handler.
func (v TaskActionValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	ta := &flytev1.TaskAction{}
	if err := ta.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Denied(field.Invalid(field.NewPath("spec"), "", "does not decode: "+decodeReason(err)).Error())
	}
	return v.check(ta)
}

// check applies the executor's rules to a decoded TaskAction: allowed (with
// warnings) or refused. Decoding takes time bounded by the object's size
// (every quantity is checked before it is parsed, api/v1 and pkg/quantity),
// so the answer comes well within the webhook's timeout: nothing is admitted
// because judging it took too long. A spec value the Go types cannot hold
// refuses the TaskAction, naming the value; the status is not judged (the
// API server drops it on create and keeps the stored one on update).
func (v TaskActionValidator) check(ta *flytev1.TaskAction) admission.Response {
	if err := ta.DecodeErrorUnder("spec"); err != nil {
		return admission.Denied(err.Error())
	}
	warnings := podSpecWarnings(ta)
	if v.Extra != nil {
		if err := v.Extra(ta); err != nil {
			return admission.Denied(err.Error()).WithWarnings(warnings...)
		}
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// podSpecWarnings lists the fields of the typed pod template that the pod
// spec does not know (Kubernetes would drop them).
func podSpecWarnings(ta *flytev1.TaskAction) []string {
	tt := ta.Spec.Template
	if tt == nil || tt.PodTemplate == nil || tt.PodTemplate.Spec == nil || len(tt.PodTemplate.Spec.Raw) == 0 {
		return nil
	}
	if len(quantity.CheckTree(tt.PodTemplate.Spec.Raw, reflect.TypeFor[corev1.PodSpec](), "", 1)) > 0 {
		return nil // not decoded: the decode in Extra names the quantity
	}
	var spec corev1.PodSpec
	strict, err := sigsjson.UnmarshalStrict(tt.PodTemplate.Spec.Raw, &spec)
	if err != nil {
		return nil // the decode in Extra names the error
	}
	p := field.NewPath("spec", "template", "podTemplate", "spec")
	warnings := make([]string, 0, len(strict))
	for _, e := range strict {
		warnings = append(warnings, fmt.Sprintf("%s: %v (Kubernetes ignores it)", p, e))
	}
	return warnings
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
