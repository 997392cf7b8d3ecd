package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCheck(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	b, err := Generate([]string{"svc.ns.svc", "127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Generate([]string{"svc.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		b     Bundle
		hosts []string
		at    time.Time
		want  string // "" means usable
	}{
		{"fresh, both hosts", b, []string{"svc.ns.svc", "127.0.0.1"}, now, ""},
		{"another host", b, []string{"other.ns.svc"}, now, "other.ns.svc"},
		{"near its end", b, []string{"svc.ns.svc"}, now.Add(Validity - RenewBefore/2), "expires"},
		{"CA of another chain", Bundle{CA: other.CA, Cert: b.Cert, Key: b.Key}, []string{"svc.ns.svc"}, now, "svc.ns.svc"},
		{"key of another chain", Bundle{CA: b.CA, Cert: b.Cert, Key: other.Key}, []string{"svc.ns.svc"}, now, "key pair"},
		{"no CA", Bundle{Cert: b.Cert, Key: b.Key}, []string{"svc.ns.svc"}, now, "no CA"},
		{"garbage", Bundle{CA: []byte("x"), Cert: []byte("y"), Key: []byte("z")}, []string{"svc.ns.svc"}, now, "key pair"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Check(tc.hosts, tc.at)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCABundlePatchTouchesOnlyStaleBundles(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	ca, other := genCA(t, now), genCA(t, now.Add(-time.Hour))
	if p := caBundlePatch([]string{"a", "b"}, [][]byte{ca, ca}, ca, now); p != nil {
		t.Errorf("patch %s for bundles already current", p)
	}
	p := caBundlePatch([]string{"a", "b", "c"}, [][]byte{ca, nil, other}, ca, now)
	var ops []map[string]any
	if err := json.Unmarshal(p, &ops); err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	want := []map[string]any{
		{"op": "test", "path": "/webhooks/1/name", "value": "b"},
		{"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": b64(ca)},
		{"op": "test", "path": "/webhooks/2/name", "value": "c"},
		// The bundle replaced is tested: a concurrent merge is not lost.
		{"op": "test", "path": "/webhooks/2/clientConfig/caBundle", "value": b64(other)},
		// The replaced CA stays beside the new one.
		{"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": b64(append(append([]byte(nil), ca...), other...))},
	}
	if len(ops) != len(want) {
		t.Fatalf("ops %v", ops)
	}
	for i := range want {
		for k, v := range want[i] {
			if ops[i][k] != v {
				t.Errorf("op %d: %s = %v, want %v", i, k, ops[i][k], v)
			}
		}
	}
}

// genCA is the CA of a chain generated at at.
func genCA(t *testing.T, at time.Time) []byte {
	t.Helper()
	b, err := Generate([]string{"svc.ns.svc"}, at)
	if err != nil {
		t.Fatal(err)
	}
	return b.CA
}

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestMergeCABundle(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	cur := genCA(t, now)                                   // made now: the retention runs
	oldCA := genCA(t, now.Add(-48*time.Hour))              // the one it replaced
	expired := genCA(t, now.Add(-Validity-24*time.Hour))   // ended a day ago
	curLongAgo := genCA(t, now.Add(-2*365*24*time.Hour))   // made two years ago: no retention
	newer := genCA(t, now.Add(-24*time.Hour))              // newer than curLongAgo
	olderThanCur := genCA(t, now.Add(-3*365*24*time.Hour)) // replaced by curLongAgo long ago
	many := [][]byte{genCA(t, now.Add(-2*time.Hour)), genCA(t, now.Add(-3*time.Hour)), genCA(t, now.Add(-4*time.Hour)),
		genCA(t, now.Add(-5*time.Hour)), genCA(t, now.Add(-6*time.Hour))}
	cases := []struct {
		name    string
		ca, old []byte
		at      time.Time
		want    []byte
	}{
		{"empty bundle", cur, nil, now, cur},
		{"already current", cur, cur, now, cur},
		{"replaced CA kept during the retention", cur, oldCA, now.Add(time.Hour), concat(cur, oldCA)},
		{"kept after a second rotation too (both still in use)", cur, concat(oldCA, expired), now, concat(cur, oldCA)},
		{"replaced CA dropped after the retention", cur, concat(cur, oldCA), now.Add(RetainReplacedCA), cur},
		{"expired CA dropped at once", cur, expired, now, cur},
		{"a successor another replica wrote is kept", curLongAgo, concat(newer, curLongAgo), now, concat(curLongAgo, newer)},
		{"an older CA long replaced is dropped", curLongAgo, concat(curLongAgo, olderThanCur), now, curLongAgo},
		{"garbage dropped", cur, concat([]byte("not a certificate\n"), oldCA, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")), now, concat(cur, oldCA)},
		{"duplicates dropped", cur, concat(oldCA, cur, oldCA), now, concat(cur, oldCA)},
		{"bounded", cur, concat(many...), now, concat(cur, many[0], many[1], many[2])},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeCABundle(tc.ca, tc.old, tc.at)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got %d CAs, want %d (or another order)", len(parseCerts(got)), len(parseCerts(tc.want)))
			}
			if again := mergeCABundle(tc.ca, got, tc.at); !bytes.Equal(again, got) {
				t.Errorf("merging the result again changed it")
			}
		})
	}
}

// A rotation (here: the chain is near its end) replaces the Secret's chain
// at once, but the other replicas serve the old certificate until their next
// resync. The webhooks, which fail closed, must trust both meanwhile: the
// caBundle gets the new CA beside the old one, which stays until the
// retention is over.
func TestRotationKeepsTheReplacedCA(t *testing.T) {
	ctx := context.Background()
	hosts := []string{"executor-webhook.flyte.svc"}
	key := types.NamespacedName{Namespace: "flyte", Name: "executor-webhook-cert"}
	made := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	b1, err := Generate(hosts, made)
	if err != nil {
		t.Fatal(err)
	}
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	hook := func(name string) admissionv1.MutatingWebhook {
		return admissionv1.MutatingWebhook{Name: name, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionv1.WebhookClientConfig{CABundle: b1.CA}}
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: b1.data()},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "executor"},
			Webhooks: []admissionv1.MutatingWebhook{hook("pods.flyte.org"), hook("taskactions.flyte.org")}},
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "executor"},
			Webhooks: []admissionv1.ValidatingWebhook{{Name: "taskactions.flyte.org", FailurePolicy: &fail, SideEffects: &none,
				AdmissionReviewVersions: []string{"v1"}, ClientConfig: admissionv1.WebhookClientConfig{CABundle: b1.CA}}}},
	).Build()
	clock := made.Add(Validity - RenewBefore/2) // b1 is due for renewal, and still valid
	s := &SelfSigned{Client: c, Secret: key, Hosts: hosts, MutatingConfig: "executor", ValidatingConfig: "executor",
		Now: func() time.Time { return clock }}

	bundles := func() [][]byte {
		t.Helper()
		m := &admissionv1.MutatingWebhookConfiguration{}
		v := &admissionv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: "executor"}, m); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, types.NamespacedName{Name: "executor"}, v); err != nil {
			t.Fatal(err)
		}
		return [][]byte{m.Webhooks[0].ClientConfig.CABundle, m.Webhooks[1].ClientConfig.CABundle, v.Webhooks[0].ClientConfig.CABundle}
	}
	trusts := func(bundle, chainCert []byte, at time.Time) bool {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return false
		}
		block, _ := pem.Decode(chainCert)
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: hosts[0], CurrentTime: at})
		return err == nil
	}

	if err := s.syncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	b2 := Bundle{CA: sec.Data[KeyCA], Cert: sec.Data[KeyCert], Key: sec.Data[KeyKey]}
	if bytes.Equal(b2.CA, b1.CA) {
		t.Fatal("the chain near its end was not replaced")
	}
	for i, b := range bundles() {
		if !trusts(b, b2.Cert, clock) {
			t.Errorf("webhook %d does not trust the new chain", i)
		}
		if !trusts(b, b1.Cert, clock) {
			t.Errorf("webhook %d no longer trusts the replaced chain, which replicas serve until their next resync", i)
		}
	}

	// A resync within the retention changes nothing.
	clock = clock.Add(DefaultResync)
	before := bundles()
	if err := s.syncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for i, b := range bundles() {
		if !bytes.Equal(b, before[i]) {
			t.Errorf("webhook %d: the bundle changed on a resync", i)
		}
	}

	// After the retention only the new CA is left.
	clock = clock.Add(RetainReplacedCA)
	if err := s.syncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for i, b := range bundles() {
		if !bytes.Equal(b, b2.CA) || trusts(b, b1.Cert, clock) {
			t.Errorf("webhook %d still holds the replaced CA after the retention (%d CAs)", i, len(parseCerts(b)))
		}
	}
}
