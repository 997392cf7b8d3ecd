package certs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchOp is one JSON-patch operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// caBundlePatch sets clientConfig.caBundle of every webhook whose bundle is
// not ca, and nothing else. Each change is guarded by a test of the webhook's
// name at that index, so a concurrent reordering fails the patch instead of
// writing the CA into another webhook. nil means nothing to change.
func caBundlePatch(names []string, bundles [][]byte, ca []byte) []byte {
	var ops []patchOp
	for i := range names {
		if bytes.Equal(bundles[i], ca) {
			continue
		}
		ops = append(ops,
			patchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: names[i]},
			patchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: ca}, // []byte: base64 in JSON
		)
	}
	if len(ops) == 0 {
		return nil
	}
	b, err := json.Marshal(ops)
	if err != nil {
		panic(err) // strings and bytes always marshal
	}
	return b
}

// InjectCABundle writes ca into the webhooks of the named configurations
// (an empty name is skipped). It returns how many configurations it changed.
// A configuration that does not exist is an error: the caller retries, since
// the configurations may be applied after the executor starts.
func InjectCABundle(ctx context.Context, c client.Client, mutating, validating string, ca []byte) (int, error) {
	changed := 0
	if mutating != "" {
		cfg := &admissionv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: mutating}, cfg); err != nil {
			return changed, fmt.Errorf("read MutatingWebhookConfiguration %s: %w", mutating, err)
		}
		names, bundles := make([]string, len(cfg.Webhooks)), make([][]byte, len(cfg.Webhooks))
		for i, w := range cfg.Webhooks {
			names[i], bundles[i] = w.Name, w.ClientConfig.CABundle
		}
		if p := caBundlePatch(names, bundles, ca); p != nil {
			if err := c.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, p)); err != nil {
				return changed, fmt.Errorf("patch caBundle of MutatingWebhookConfiguration %s: %w", mutating, err)
			}
			changed++
		}
	}
	if validating != "" {
		cfg := &admissionv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: validating}, cfg); err != nil {
			return changed, fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", validating, err)
		}
		names, bundles := make([]string, len(cfg.Webhooks)), make([][]byte, len(cfg.Webhooks))
		for i, w := range cfg.Webhooks {
			names[i], bundles[i] = w.Name, w.ClientConfig.CABundle
		}
		if p := caBundlePatch(names, bundles, ca); p != nil {
			if err := c.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, p)); err != nil {
				return changed, fmt.Errorf("patch caBundle of ValidatingWebhookConfiguration %s: %w", validating, err)
			}
			changed++
		}
	}
	return changed, nil
}
