package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/taskaction/executor/pkg/secrets"
)

// PodSecretInjector is the mutating webhook for pod creation: it injects the
// secrets a labelled pod asks for in its flyte.secrets/s<i> annotations.
// A pod whose requests cannot be served is refused (400) with a message
// naming the request, so it is never created without its secrets.
type PodSecretInjector struct {
	Injector secrets.Injector
}

// Handle implements admission.Handler.
func (h *PodSecretInjector) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	// The object selector already limits calls to labelled pods; a call for
	// another pod (a configuration without the selector) changes nothing.
	if pod.Labels[secrets.PodLabel] != secrets.PodLabelValue {
		return admission.Allowed("not labelled " + secrets.PodLabel + "=" + secrets.PodLabelValue)
	}
	reqs, err := secrets.FromAnnotations(pod.Annotations)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if len(reqs) == 0 {
		return admission.Allowed("no secret requests")
	}
	if err := secrets.InjectAll(h.Injector, pod, reqs); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	mutated, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}
