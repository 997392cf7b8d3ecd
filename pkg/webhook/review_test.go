package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/test/faults/badinput/hostile"
)

// reviewOf is the AdmissionReview body of a request of apiVersion for object.
func reviewOf(apiVersion, uid string, op admissionv1.Operation, object string) []byte {
	return []byte(`{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":{"uid":"` + uid +
		`","kind":{"group":"flyte.org","version":"v1","kind":"TaskAction"},"resource":{"group":"flyte.org","version":"v1","resource":"taskactions"},` +
		`"namespace":"ns","operation":"` + string(op) + `","userInfo":{"username":"alice"},"object":` + object + `}}`)
}

// postReview posts body to h.
func postReview(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// serveReview posts body to h and decodes the answer.
func serveReview(t testing.TB, h http.Handler, contentType string, body []byte) (int, admissionv1.AdmissionReview) {
	t.Helper()
	return answerOf(t, postReview(h, contentType, body))
}

// answerOf decodes the AdmissionReview h answered with.
func answerOf(t testing.TB, w *httptest.ResponseRecorder) (int, admissionv1.AdmissionReview) {
	t.Helper()
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &ar); err != nil || ar.Response == nil {
		t.Fatalf("the answer %q is not an AdmissionReview with a response: %v", w.Body.String(), err)
	}
	return w.Code, ar
}

type handlerFunc func(context.Context, admission.Request) admission.Response

func (f handlerFunc) Handle(ctx context.Context, r admission.Request) admission.Response {
	return f(ctx, r)
}

// TestReviewHandler: the TaskAction webhooks' server answers as
// controller-runtime's admission.Webhook does: the request's version echoed,
// its UID in the answer, the handler's patch as a JSON patch, the whole
// request handed to the handler; bad requests refused with their HTTP
// status in the answer, a panic answered 500.
func TestReviewHandler(t *testing.T) {
	var got admission.Request
	echo := reviewHandler{log: logr.Discard(), handler: handlerFunc(func(_ context.Context, r admission.Request) admission.Response {
		got = r
		return admission.Denied("no")
	})}
	ta := `{"apiVersion":"flyte.org/v1","kind":"TaskAction","metadata":{"name":"a","namespace":"ns"}}`
	for _, v := range []string{reviewV1, reviewV1beta1} {
		code, ar := serveReview(t, echo, "application/json", reviewOf(v, "u-1", admissionv1.Update, ta))
		if code != http.StatusOK || ar.APIVersion != v || ar.Kind != "AdmissionReview" || ar.Response.UID != "u-1" || ar.Response.Allowed {
			t.Errorf("%s: HTTP %d, answer %s %s uid %q allowed %v; want 200, the same version, uid u-1, denied", v, code, ar.APIVersion, ar.Kind, ar.Response.UID, ar.Response.Allowed)
		}
		if got.Operation != admissionv1.Update || got.Namespace != "ns" || got.UserInfo.Username != "alice" || got.Kind.Kind != "TaskAction" || string(got.Object.Raw) != ta {
			t.Errorf("%s: the handler got %+v; want the whole request", v, got.AdmissionRequest)
		}
	}

	admit := reviewHandler{log: logr.Discard(), handler: TaskActionAdmission{}}
	_, ar := serveReview(t, admit, "application/json", reviewOf(reviewV1, "u-2", admissionv1.Create, ta))
	if !ar.Response.Allowed || ar.Response.PatchType == nil || *ar.Response.PatchType != admissionv1.PatchTypeJSONPatch ||
		!strings.Contains(string(ar.Response.Patch), flytev1.Finalizer) || ar.Response.UID != "u-2" {
		t.Errorf("create: allowed %v, patch %s (%v), uid %q; want the finalizer patched in", ar.Response.Allowed, ar.Response.Patch, ar.Response.PatchType, ar.Response.UID)
	}

	panics := reviewHandler{log: logr.Discard(), handler: handlerFunc(func(context.Context, admission.Request) admission.Response { panic("boom") })}
	if _, ar := serveReview(t, panics, "application/json", reviewOf(reviewV1, "u-3", admissionv1.Create, ta)); ar.Response.Allowed ||
		ar.Response.Result == nil || ar.Response.Result.Code != http.StatusInternalServerError || ar.Response.UID != "u-3" {
		t.Errorf("a panicking handler: %+v; want refused with 500 and the request's UID", ar.Response)
	}

	huge := reviewOf(reviewV1, "u-4", admissionv1.Create, `"`+strings.Repeat("x", maxReviewSize)+`"`)
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		code              int32
	}{
		{"empty body", "application/json", nil, http.StatusBadRequest},
		{"another content type", "text/plain", reviewOf(reviewV1, "u", admissionv1.Create, ta), http.StatusBadRequest},
		{"over the size limit", "application/json", huge, http.StatusRequestEntityTooLarge},
		{"not JSON", "application/json", []byte(`{"apiVersion":`), http.StatusBadRequest},
		{"another kind", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}`), http.StatusBadRequest},
		{"another version", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u"}}`), http.StatusBadRequest},
		{"field names in another case", "application/json", []byte(`{"APIVERSION":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`), http.StatusBadRequest},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
	} {
		code, ar := serveReview(t, echo, tc.contentType, tc.body)
		if code != http.StatusOK || ar.APIVersion != reviewV1 || ar.Response.Allowed || ar.Response.Result == nil || ar.Response.Result.Code != tc.code || ar.Response.Result.Message == "" {
			t.Errorf("%s: HTTP %d, %s, %+v; want refused with %d and a message", tc.name, code, ar.APIVersion, ar.Response, tc.code)
		}
	}
}

// FuzzReviewHandler: whatever body reaches the TaskAction webhooks, the
// answer is an AdmissionReview, within hostile.Bound, without a panic.
func FuzzReviewHandler(f *testing.F) {
	f.Add(reviewOf(reviewV1, "u", admissionv1.Create, `{"metadata":{"name":"a"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}`))
	f.Add([]byte(`[]`))
	h := reviewHandler{log: logr.Discard(), handler: TaskActionAdmission{}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var w *httptest.ResponseRecorder
		hostile.Within(t, "AdmissionReview", func() { w = postReview(h, "application/json", body) })
		answerOf(t, w)
	})
}
