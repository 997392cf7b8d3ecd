package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/webhook"
	"github.com/taskaction/executor/test/faults/badinput/hostile"
)

// hugeExponents are TaskActions whose quantity (1e2147483648) the decoder
// used to expand forever, where only the webhook can see it, and the field
// the refusal must name.
func hugeExponents(ns string) []struct {
	name, field string
	obj         map[string]any
} {
	typed := hostile.TaskAction(ns, "typed-resources")
	hostile.Container(typed)["resources"] = map[string]any{"limits": map[string]any{"cpu": hostile.HugeExponent}}
	pod := hostile.TaskAction(ns, "typed-podtemplate")
	hostile.Template(pod)["podTemplate"] = map[string]any{"spec": hostile.PodTemplateSpec(hostile.HugeExponent)}
	return []struct {
		name, field string
		obj         map[string]any
	}{
		{"typed resources", "spec.template.container.resources.limits.cpu", typed},
		{"typed pod template", "spec.template.podTemplate.spec.containers[0].resources.limits.cpu", pod},
		{"Flyte's template", "spec.taskTemplate.container.resources.requests[0]", hostile.FlyteTaskAction(ns, "flyte-resources", hostile.FlyteTemplate(hostile.HugeExponent))},
		{"Flyte's pod template", "spec.taskTemplate.k8sPod.podSpec.containers[0].resources.limits.cpu", hostile.FlyteTaskAction(ns, "flyte-pod", hostile.FlytePodTemplate(hostile.HugeExponent))},
		{"Flyte's shared memory", "spec.taskTemplate.extendedResources.sharedMemory.sizeLimit", hostile.FlyteTaskAction(ns, "flyte-shm", hostile.FlyteSharedMemoryTemplate(hostile.HugeExponent))},
	}
}

func validatorOf(t testing.TB) webhook.TaskActionValidator {
	t.Helper()
	settings, err := setup.PluginSettings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	return webhook.TaskActionValidator{Extra: setup.TaskActionValidator(settings, nil)}
}

func request(op admissionv1.Operation, raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Object: runtime.RawExtension{Raw: raw}}}
}

// The admission handlers answer a huge exponent at once, refusing it and
// naming the field (they used to decode it forever, so the API server's
// timeout admitted it); the same for a typed quantity that is not one.
func TestAdmissionRefusesHugeExponentsNamingTheField(t *testing.T) {
	v := validatorOf(t)
	lots := hostile.TaskAction("ns", "lots")
	hostile.Container(lots)["resources"] = map[string]any{"requests": map[string]any{"cpu": "lots"}}
	cases := append(hugeExponents("ns"), struct {
		name, field string
		obj         map[string]any
	}{"not a quantity", "spec.template.container.resources.requests.cpu", lots})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			for _, resp := range []admission.Response{
				webhook.TaskActionAdmission{Validator: v}.Handle(context.Background(), request(admissionv1.Create, raw)),
				v.Handle(context.Background(), request(admissionv1.Update, raw)),
			} {
				if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.field) {
					t.Errorf("allowed %v, %+v; want a refusal naming %s", resp.Allowed, resp.Result, tc.field)
				}
			}
		})
	}
	// A status the Go types cannot hold is not the webhook's to judge: the
	// API server drops it on create.
	st := hostile.TaskAction("ns", "status")
	st["status"] = map[string]any{"pluginStateVersion": 300, "attempts": -1}
	raw, _ := json.Marshal(st)
	if resp := (webhook.TaskActionAdmission{Validator: v}).Handle(context.Background(), request(admissionv1.Create, raw)); !resp.Allowed {
		t.Errorf("a create with an undecodable status: refused %+v", resp.Result)
	}
}

// With the webhook serving the API server, such a TaskAction is refused at
// create, naming the field, not admitted because the answer took too long.
func TestWebhookNoLongerAdmitsHugeExponentsOnTimeout(t *testing.T) {
	ctx := context.Background()
	startWebhook(t, webhookConfig(), setup.Options{})
	ns := testenv.Namespace(t, env.Client, "whq-")
	for _, tc := range hugeExponents(ns) {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, &unstructured.Unstructured{Object: tc.obj})
			if err == nil {
				t.Fatalf("created, want a refusal naming %s", tc.field)
			}
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("refused with %v, want a refusal naming %s", err, tc.field)
			}
		})
	}
	if err := env.Client.Create(ctx, taskAction(ns, "valid-after")); err != nil {
		t.Errorf("a valid TaskAction after them: %v", err)
	}
}

// FuzzAdmission: the admission webhook's handlers. Whatever object a client
// sends, the create (mutating) and update (validating) handlers answer
// within hostile.Bound, without panicking.
func FuzzAdmission(f *testing.F) {
	for _, d := range hostile.Documents() {
		f.Add(d.JSON)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	v := validatorOf(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		hostile.Within(t, "admission", func() {
			_ = webhook.TaskActionAdmission{Validator: v}.Handle(context.Background(), request(admissionv1.Create, raw))
			_ = v.Handle(context.Background(), request(admissionv1.Update, raw))
		})
	})
}
