package manager

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/internal/testenv"
)

const leaseName = "abf369a8.flyte.org"

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := clientset.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func TestProbes(t *testing.T) {
	p := startExecutor(t, nil)
	// Asked many times: a ready replica must stay ready, not flap.
	for i := 0; i < 20; i++ {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get("http://" + p.probeAddr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s (try %d): %d, want 200", path, i, resp.StatusCode)
			}
		}
	}
	// A path that is not a probe must not answer 200, or the check above proves nothing.
	resp, err := http.Get("http://" + p.probeAddr + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("/nothing answered 200")
	}
}

func serviceAccountToken(t *testing.T, ns, name string, reader bool) string {
	t.Helper()
	return testenv.ServiceAccountToken(t, clientset, ns, name, reader)
}

func TestMetricsAuthentication(t *testing.T) {
	ns := newNamespace(t, "metrics-")
	readerToken := serviceAccountToken(t, ns, "scraper", true)
	otherToken := serviceAccountToken(t, ns, "stranger", false)

	p := startExecutor(t, nil)
	cases := []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		// controller-runtime's filter answers a rejected token with 500
		// ("Authentication failed"), not 401; what matters is that it is refused.
		{"garbage token", "not-a-token", http.StatusInternalServerError},
		{"metrics-reader token", readerToken, http.StatusOK},
		{"token without the role", otherToken, http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := p.metricsGet(t, tc.token)
			if code != tc.want {
				t.Errorf("status %d, want %d; body %q", code, tc.want, body)
			}
			// The real metrics, not just any 200.
			if tc.want == http.StatusOK && !strings.Contains(body, "# HELP") {
				t.Errorf("200 without Prometheus text: %q", body)
			}
		})
	}
}

// metricsSecure=false is the opt-out: plain HTTP, no token needed.
func TestMetricsInsecure(t *testing.T) {
	p := startExecutor(t, nil, "--executor.metricsSecure=false")
	var resp *http.Response
	var err error
	for i := 0; i < 50; i++ {
		if resp, err = http.Get("http://" + p.metricsAddr + "/metrics"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "# HELP") {
		t.Errorf("plain /metrics: %d %q", resp.StatusCode, body.String())
	}
}

func waitForLease(t *testing.T, ns string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		l, err := clientset.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return *l.Spec.HolderIdentity
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no held Lease %s/%s within 60s", ns, leaseName)
	return ""
}

func TestLeaderElectionLease(t *testing.T) {
	flagNS := newNamespace(t, "lease-flag-")
	envNS := newNamespace(t, "lease-env-")
	cases := []struct {
		name string
		env  []string
		args []string
		ns   string
	}{
		{"namespace from flag", []string{"POD_NAMESPACE=" + envNS}, []string{"--executor.leaderElectionNamespace=" + flagNS}, flagNS},
		{"namespace from POD_NAMESPACE", []string{"POD_NAMESPACE=" + envNS}, nil, envNS},
		{"default namespace", nil, nil, "default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startExecutor(t, tc.env, append([]string{"--executor.leaderElect=true"}, tc.args...)...)
			holder := waitForLease(t, tc.ns)
			if holder == "" {
				t.Fatal("no holder")
			}
			// Released on a clean shutdown, so a successor need not wait out the lease.
			if code := p.terminate(t); code != 0 {
				t.Fatalf("exit %d after SIGTERM", code)
			}
			l, err := clientset.CoordinationV1().Leases(tc.ns).Get(context.Background(), leaseName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == holder {
				t.Errorf("lease still held by %s after shutdown", holder)
			}
		})
	}
	t.Run("no lease without leaderElect", func(t *testing.T) {
		ns := newNamespace(t, "lease-off-")
		startExecutor(t, []string{"POD_NAMESPACE=" + ns})
		time.Sleep(2 * time.Second)
		_, err := clientset.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("want no lease, got %v", err)
		}
	})
}

// selfSignedCert writes tls.crt/tls.key (or the given names) into dir and returns the DER.
func selfSignedCert(t *testing.T, dir, certName, keyName string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "executor-metrics-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certName, "CERTIFICATE", der)
	write(keyName, "PRIVATE KEY", kb)
	return der
}

func TestMetricsServesConfiguredCertificate(t *testing.T) {
	cases := []struct {
		name, certName, keyName string
		args                    []string
	}{
		{"default file names", "tls.crt", "tls.key", nil},
		{"custom file names", "metrics.pem", "metrics-key.pem", []string{"--executor.metricsCertName=metrics.pem", "--executor.metricsCertKey=metrics-key.pem"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			der := selfSignedCert(t, dir, tc.certName, tc.keyName)
			p := startExecutor(t, nil, append([]string{"--executor.metricsCertPath=" + dir}, tc.args...)...)
			leaf, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(leaf)
			// Verified against our certificate only: the built-in self-signed one would fail.
			conn, err := dialTLS(p.metricsAddr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			if err != nil {
				t.Fatalf("TLS with our CA: %v", err)
			}
			defer conn.Close()
			got := conn.ConnectionState().PeerCertificates[0].Raw
			if !bytes.Equal(got, der) {
				t.Errorf("metrics server presents another certificate")
			}
		})
	}
	t.Run("without a cert path the certificate is not ours", func(t *testing.T) {
		der := selfSignedCert(t, t.TempDir(), "tls.crt", "tls.key")
		p := startExecutor(t, nil)
		conn, err := dialTLS(p.metricsAddr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if bytes.Equal(conn.ConnectionState().PeerCertificates[0].Raw, der) {
			t.Error("unexpected certificate")
		}
	})
}

// dialTLS retries while the metrics server is still coming up.
func dialTLS(addr string, cfg *tls.Config) (*tls.Conn, error) {
	var err error
	for i := 0; i < 50; i++ {
		var conn *tls.Conn
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			return conn, nil
		}
		var opErr *net.OpError
		if !errors.As(err, &opErr) || opErr.Op != "dial" {
			return nil, err // a TLS-level answer: the server is up
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}

func TestMetricsHTTP2(t *testing.T) {
	t.Run("off by default: an h2-only offer is refused", func(t *testing.T) {
		p := startExecutor(t, nil)
		// Wait until the server answers over HTTP/1.1, so a refusal below is the ALPN's doing.
		if code, _ := p.metricsGet(t, ""); code != http.StatusUnauthorized {
			t.Fatalf("metrics over http/1.1: %d", code)
		}
		conn, err := dialTLS(p.metricsAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err == nil {
			defer conn.Close()
			if proto := conn.ConnectionState().NegotiatedProtocol; proto == "h2" {
				t.Errorf("h2 negotiated with enableHTTP2=false")
			}
		}
	})
	t.Run("enableHTTP2=true negotiates and speaks h2", func(t *testing.T) {
		p := startExecutor(t, nil, "--executor.enableHTTP2=true")
		conn, err := dialTLS(p.metricsAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("h2 offer refused: %v", err)
		}
		proto := conn.ConnectionState().NegotiatedProtocol
		conn.Close()
		if proto != "h2" {
			t.Fatalf("negotiated %q, want h2", proto)
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2: true,
		}}
		resp, err := c.Get("https://" + p.metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("got %s %d, want HTTP/2 401", resp.Proto, resp.StatusCode)
		}
	})
}

func TestSIGTERMShutsDownCleanly(t *testing.T) {
	p := startExecutor(t, nil)
	start := time.Now()
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0 (%v)\n%s", code, p.waitErr, p.log.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	// Nothing listens any more.
	if resp, err := http.Get("http://" + p.probeAddr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("probe server still answers after exit")
	}
}
