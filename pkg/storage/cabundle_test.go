package storage_test

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/config"
)

// isolateAWS keeps the machine's AWS configuration out of a test.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_PROFILE": "", "AWS_CA_BUNDLE": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
		"AWS_MAX_ATTEMPTS": "1", // a refused certificate is an answer, not an outage to retry
	} {
		t.Setenv(k, v)
	}
}

// An S3-compatible service behind a private CA (MinIO with its own
// certificate) is reached with the CA of AWS_CA_BUNDLE, and the configured
// headers and timeout still apply.
func TestS3WithAWSCABundle(t *testing.T) {
	f := newFakeS3(t, true) // its certificate is signed by no CA the system trusts
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := f.config("flyte-data")
	cfg.DefaultHTTPClient = config.StorageHTTPClientConfig{Timeout: config.Duration{Duration: time.Minute},
		Headers: map[string][]string{"X-Flyte-Test": {"yes"}}}
	ctx := context.Background()

	t.Run("without the bundle the private CA is not trusted", func(t *testing.T) {
		s := newStore(t, cfg)
		if _, err := s.Read(ctx, "s3://flyte-data/run/inputs.pb"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("err = %v, want a certificate error", err)
		}
	})
	t.Run("AWS_CA_BUNDLE names it", func(t *testing.T) {
		t.Setenv("AWS_CA_BUNDLE", bundle)
		s := newStore(t, cfg)
		b, err := s.Read(ctx, "s3://flyte-data/run/inputs.pb")
		if err != nil || string(b) != "flyte-data/run/inputs.pb" {
			t.Fatalf("read: %q, %v", b, err)
		}
		if ok, err := s.OutputsExist(ctx, "s3://flyte-data/run/1"); err != nil || !ok {
			t.Fatalf("exists: %v, %v", ok, err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		last := f.headers[len(f.headers)-1]
		if last.Get("X-Flyte-Test") != "yes" {
			t.Fatalf("the configured header was not sent: %v", last)
		}
	})
}
