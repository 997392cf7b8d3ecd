package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// maxReviewSize bounds an AdmissionReview's body, as controller-runtime's
// admission server does (the API server's own request limit is larger).
const maxReviewSize = 7 << 20

// reviewHandler serves one admission webhook as controller-runtime's
// admission.Webhook does (the same limits, answers and panic recovery), with
// the AdmissionReview decoded in one case-sensitive JSON pass: the runtime
// codec that admission.Webhook uses reads the body twice (its kind, then
// the review), and the TaskAction webhook is called for every create
// (4.9% of the executor's CPU at N=10,000 was that decode).
type reviewHandler struct {
	handler admission.Handler
	log     logr.Logger
}

// review is an AdmissionReview of either version: both have the same fields,
// and the answer carries the request's apiVersion back.
type review struct {
	metav1.TypeMeta `json:",inline"`
	Request         *admissionv1.AdmissionRequest `json:"request,omitempty"`
}

const (
	reviewV1      = "admission.k8s.io/v1"
	reviewV1beta1 = "admission.k8s.io/v1beta1"
)

func (h reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rv, status, err := readReview(r)
	if err != nil {
		h.log.Error(err, "bad admission request")
		h.write(w, reviewV1, admission.Errored(status, err).AdmissionResponse)
		return
	}
	resp := h.handle(r.Context(), admission.Request{AdmissionRequest: *rv.Request})
	h.write(w, rv.APIVersion, resp.AdmissionResponse)
}

// readReview reads and decodes the body of an admission request, one with a
// request; an error comes with the HTTP status its answer carries.
func readReview(r *http.Request) (review, int32, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return review{}, http.StatusBadRequest, errors.New("request body is empty")
	}
	defer r.Body.Close()
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= maxReviewSize {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, maxReviewSize+1)); err != nil {
		return review{}, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	}
	if buf.Len() > maxReviewSize {
		return review{}, http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return review{}, http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	var rv review
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(buf.Bytes(), &rv); err != nil {
		return review{}, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if rv.Kind != "AdmissionReview" || (rv.APIVersion != reviewV1 && rv.APIVersion != reviewV1beta1) {
		return review{}, http.StatusBadRequest, fmt.Errorf("expected an AdmissionReview of %s or %s, got kind %q of %q", reviewV1, reviewV1beta1, rv.Kind, rv.APIVersion)
	}
	if rv.Request == nil {
		return review{}, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	}
	return rv, 0, nil
}

// handle runs the handler, completes its answer (UID, patch) and turns a
// panic into an error answer.
func (h reviewHandler) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error(fmt.Errorf("panic: %v", p), "admission handler panicked", "uid", req.UID)
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			resp.UID = req.UID
		}
	}()
	resp = h.handler.Handle(ctx, req)
	if err := resp.Complete(req); err != nil {
		h.log.Error(err, "unable to encode the admission response", "uid", req.UID)
		resp = admission.Errored(http.StatusInternalServerError, errors.New("unable to encode the response"))
		resp.UID = req.UID
	}
	return resp
}

func (h reviewHandler) write(w http.ResponseWriter, apiVersion string, resp admissionv1.AdmissionResponse) {
	w.Header().Set("Content-Type", "application/json")
	// Both versions have the v1 fields.
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}, Response: &resp}
	if err := json.NewEncoder(w).Encode(ar); err != nil {
		h.log.Error(err, "unable to write the admission response", "uid", resp.UID)
	}
}
