package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"time"

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

// RetainReplacedCA is how long a CA stays in a caBundle after the Secret's
// CA replaced it, counted from the new CA's notBefore (an hour before it was
// made). The replicas still serving a certificate of the replaced chain load
// the new one at their next resync (DefaultResync, or sooner while they
// retry): until then the fail-closed webhooks must keep trusting them.
const RetainReplacedCA = 24 * time.Hour

// MaxBundleCAs bounds the CAs one caBundle holds (the current ones first).
const MaxBundleCAs = 4

// mergeCABundle is the caBundle a webhook should hold at now, given the
// Secret's CA (ca) and the bundle it holds (old): ca first, then each CA of
// old that is still needed, at most MaxBundleCAs in all. A CA of old is kept
// while it has not expired and either the current CA was made less than
// RetainReplacedCA ago or it is newer than the current CA (a replica that
// read the Secret before another replaced it must not remove the successor).
// Anything in old that is not a certificate is dropped. The result is
// canonical PEM, so merging it again changes nothing.
func mergeCABundle(ca, old []byte, now time.Time) []byte {
	current := parseCerts(ca)
	if len(current) == 0 {
		return ca // the Secret's check would have refused it; write it as it is
	}
	var newest time.Time
	for _, c := range current {
		if c.NotBefore.After(newest) {
			newest = c.NotBefore
		}
	}
	var out []byte
	seen := map[string]bool{}
	n := 0
	add := func(c *x509.Certificate) {
		if n >= MaxBundleCAs || seen[string(c.Raw)] {
			return
		}
		seen[string(c.Raw)] = true
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		n++
	}
	for _, c := range current {
		add(c)
	}
	retaining := now.Before(newest.Add(RetainReplacedCA))
	for _, c := range parseCerts(old) {
		if now.After(c.NotAfter) || !(retaining || c.NotBefore.After(newest)) {
			continue
		}
		add(c)
	}
	return out
}

// parseCerts reads the PEM certificates of b, skipping anything else.
func parseCerts(b []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for len(b) > 0 {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
	return certs
}

// caBundlePatch sets clientConfig.caBundle of every webhook whose bundle is
// not what mergeCABundle makes of it with ca at now, and nothing else. Each
// change is guarded by a test of the webhook's name at that index, so a
// concurrent reordering fails the patch instead of writing the CA into
// another webhook, and by a test of the bundle it replaces, so that two
// replicas merging at once cannot drop what the other one added (the loser
// reads again at its retry). nil means nothing to change.
func caBundlePatch(names []string, bundles [][]byte, ca []byte, now time.Time) []byte {
	var ops []patchOp
	for i := range names {
		want := mergeCABundle(ca, bundles[i], now)
		if bytes.Equal(bundles[i], want) {
			continue
		}
		ops = append(ops, patchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: names[i]})
		if len(bundles[i]) > 0 {
			ops = append(ops, patchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: bundles[i]})
		}
		ops = append(ops, patchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: want}) // []byte: base64 in JSON
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
// (an empty name is skipped), keeping the CAs it replaces while replicas may
// still serve their chains (mergeCABundle, as of now). It returns how many
// configurations it changed. A configuration that does not exist is an
// error: the caller retries, since the configurations may be applied after
// the executor starts.
func InjectCABundle(ctx context.Context, c client.Client, mutating, validating string, ca []byte, now time.Time) (int, error) {
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
		if p := caBundlePatch(names, bundles, ca, now); p != nil {
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
		if p := caBundlePatch(names, bundles, ca, now); p != nil {
			if err := c.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, p)); err != nil {
				return changed, fmt.Errorf("patch caBundle of ValidatingWebhookConfiguration %s: %w", validating, err)
			}
			changed++
		}
	}
	return changed, nil
}
