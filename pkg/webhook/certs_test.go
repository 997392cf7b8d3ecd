package webhook_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/secrets"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/webhook"
	"github.com/taskaction/executor/pkg/webhook/certs"
)

// writePair writes a serving pair for 127.0.0.1 into dir, replacing the
// files by rename as a mounted Secret's update does, and returns its leaf.
func writePair(t *testing.T, dir, certName, keyName string) []byte {
	t.Helper()
	b, err := certs.Generate([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{certName: b.Cert, keyName: b.Key} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(b.Cert)
	return block.Bytes
}

func TestGivenCertDirIsServedAndReloaded(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, "serving.pem", "serving-key.pem")
	c := webhookConfig()
	c.WebhookPort = freePort(t)
	c.WebhookCertPath, c.WebhookCertName, c.WebhookCertKey = dir, "serving.pem", "serving-key.pem"
	startWebhook(t, c, setup.Options{})
	addr := "127.0.0.1:" + strconv.Itoa(c.WebhookPort)

	st, err := dialCert(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.PeerCertificates[0].Raw, first) {
		t.Fatal("the server does not present the certificate of webhookCertPath")
	}

	t.Run("an h2-only offer is refused with enableHTTP2 false", func(t *testing.T) {
		st, err := dialCert(addr, "h2")
		if err == nil && st.NegotiatedProtocol == "h2" {
			t.Errorf("h2 negotiated with enableHTTP2=false")
		}
		if st, err := dialCert(addr, "h2", "http/1.1"); err != nil || st.NegotiatedProtocol != "http/1.1" {
			t.Errorf("h2,http/1.1 offer: %v, negotiated %v; want http/1.1", err, st)
		}
	})

	t.Run("enableHTTP2 true negotiates h2 (the refusal above is the option's doing)", func(t *testing.T) {
		h2 := c
		h2.WebhookPort, h2.EnableHTTP2 = freePort(t), true
		stop := startWebhook(t, h2, setup.Options{})
		defer stop()
		st, err := dialCert("127.0.0.1:"+strconv.Itoa(h2.WebhookPort), "h2")
		if err != nil || st.NegotiatedProtocol != "h2" {
			t.Errorf("h2 offer with enableHTTP2=true: %v, %v", err, st)
		}
	})

	t.Run("replaced files are served without a restart", func(t *testing.T) {
		second := writePair(t, dir, "serving.pem", "serving-key.pem")
		// The watcher sees the rename at once, or at its next poll (10s).
		testenv.Eventually(t, 60*time.Second, "the replaced certificate", func() bool {
			st, err := dialCert(addr)
			return err == nil && bytes.Equal(st.PeerCertificates[0].Raw, second)
		})
	})
}

// With no certificate directory the executor generates a chain, stores it in
// its Secret and writes the CA into its own configurations; the API server
// then calls it over TLS it verifies. Here the configuration's failure policy
// is Fail and the webhook adds a variable only this server adds, so a created
// pod carrying it proves that the call went through.
func TestGeneratedCertIsTrustedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	// The real configurations (envtest's port) must answer too: they match the same pods.
	startWebhook(t, webhookConfig(), setup.Options{})

	ns := testenv.Namespace(t, c, "whgen-")
	port := freePort(t)
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	url := "https://127.0.0.1:" + strconv.Itoa(port) + webhook.PathPodSecrets
	cfgName := "generated-" + ns
	mwc := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cfgName},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    "generated.executor.flyte.org",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{secrets.PodLabel: secrets.PodLabelValue}},
			FailurePolicy:     &fail,
			SideEffects:       &none,
		}},
	}
	if err := c.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, mwc) })

	gen := webhookConfig()
	gen.WebhookPort = port
	gen.WebhookCertPath = ""
	gen.Webhook.Namespace = ns
	gen.Webhook.CertHosts = "127.0.0.1"
	gen.Webhook.MutatingConfigName, gen.Webhook.ValidatingConfigName = cfgName, ""
	gen.Webhook.SecretEnvPrefix = "_GENERATED_"
	startWebhook(t, gen, setup.Options{})

	// The CA lands in the configuration's caBundle, and only there.
	sec := &corev1.Secret{}
	testenv.Eventually(t, 60*time.Second, "caBundle written", func() bool {
		got := &admissionv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(mwc), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Webhooks[0].ClientConfig.CABundle) == 0 {
			return false
		}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: gen.Webhook.SecretName}, sec); err != nil {
			t.Fatalf("certificate Secret: %v", err)
		}
		if !bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, sec.Data[certs.KeyCA]) {
			t.Fatalf("caBundle is not the Secret's CA")
		}
		want := mwc.Webhooks[0].DeepCopy()
		want.ClientConfig.CABundle = got.Webhooks[0].ClientConfig.CABundle
		if *want.ClientConfig.URL != *got.Webhooks[0].ClientConfig.URL || got.Webhooks[0].Name != want.Name ||
			*got.Webhooks[0].FailurePolicy != fail {
			t.Fatalf("the configuration changed beyond its caBundle: %+v", got.Webhooks[0])
		}
		return true
	})

	st, err := dialCert("127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sec.Data[certs.KeyCA])
	if _, err := st.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Fatalf("the served certificate does not chain to the Secret's CA: %v", err)
	}

	// A pod through the API server: both webhooks must answer (Fail).
	pod := podAsking(ns, "through-generated", true, secrets.Request{Group: "g", Key: "k", Mount: secrets.MountEnvVar})
	var createErr error
	testenv.Eventually(t, 60*time.Second, "a pod admitted through the generated certificate", func() bool {
		createErr = c.Create(ctx, pod.DeepCopy())
		return createErr == nil
	})
	got := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if envOf(got.Spec.Containers[0], "_GENERATED_G_K") == nil {
		t.Errorf("the generated-certificate server did not mutate the pod: %+v", got.Spec.Containers[0].Env)
	}
}

func TestCertificateSecretRaceEndsWithOneSecret(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := testenv.Namespace(t, c, "whrace-")
	key := types.NamespacedName{Namespace: ns, Name: "webhook-cert"}
	hosts := []string{"svc." + ns + ".svc"}

	const replicas = 4
	var wg sync.WaitGroup
	cas := make([][]byte, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _, err := certs.EnsureSecret(ctx, c, key, hosts, time.Now())
			cas[i], errs[i] = b.CA, err
		}()
	}
	wg.Wait()
	stored := &corev1.Secret{}
	if err := c.Get(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if !bytes.Equal(cas[i], stored.Data[certs.KeyCA]) {
			t.Errorf("replica %d serves a CA that is not the stored one", i)
		}
	}

	t.Run("an unusable Secret is replaced", func(t *testing.T) {
		stored.Data[certs.KeyCert] = []byte("garbage")
		if err := c.Update(ctx, stored); err != nil {
			t.Fatal(err)
		}
		b, _, err := certs.EnsureSecret(ctx, c, key, hosts, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		again := &corev1.Secret{}
		if err := c.Get(ctx, key, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Data[certs.KeyCert], b.Cert) || strings.Contains(string(again.Data[certs.KeyCert]), "garbage") {
			t.Error("the garbage certificate was not replaced")
		}
	})
	t.Run("a certificate for other hosts is replaced", func(t *testing.T) {
		b, _, err := certs.EnsureSecret(ctx, c, key, []string{"other." + ns + ".svc"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Check([]string{"other." + ns + ".svc"}, time.Now()); err != nil {
			t.Error(err)
		}
	})
}
