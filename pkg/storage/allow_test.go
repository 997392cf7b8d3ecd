package storage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/storage"
)

// refused checks that err is the storage layer's refusal of uri, matchable
// with errors.Is, naming the URI and the key that would allow it.
func refused(t *testing.T, what, uri string, err error) {
	t.Helper()
	if !errors.Is(err, storage.ErrLocationNotAllowed) {
		t.Fatalf("%s %s: err = %v, want ErrLocationNotAllowed", what, uri, err)
	}
	for _, want := range []string{uri, "storage.allowed-containers"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s %s: %q does not name %q", what, uri, err, want)
		}
	}
}

// A TaskAction's author chooses its inputUri and runOutputBase: the executor
// must not read or write, with its own credentials, a bucket its storage
// section does not name, and never sends the service a request for one.
func TestAnotherBucketIsRefused(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, false)
	s := newStore(t, f.config("flyte-data"))

	if b, err := s.Read(ctx, "s3://flyte-data/p/d/run/a0/inputs.pb"); err != nil || string(b) != "flyte-data/p/d/run/a0/inputs.pb" {
		t.Fatalf("the configured container: %q, %v", b, err)
	}
	const other = "s3://someone-elses/secrets/inputs.pb"
	_, err := s.Read(ctx, other)
	refused(t, "Read", other, err)
	if !strings.Contains(err.Error(), "s3://someone-elses") {
		t.Fatalf("the message does not say what to allow: %v", err)
	}
	_, err = s.ReadInputs(ctx, "s3://someone-elses/secrets")
	refused(t, "ReadInputs", "s3://someone-elses/secrets/inputs.pb", err)
	_, err = s.ReadTaskError(ctx, "s3://someone-elses/out/1")
	refused(t, "ReadTaskError", "s3://someone-elses/out/1/error.pb", err)
	_, err = s.HasTaskError(ctx, "s3://someone-elses/out/1")
	refused(t, "HasTaskError", "s3://someone-elses/out/1/error.pb", err)
	_, err = s.OutputsExist(ctx, "s3://someone-elses/out/1")
	refused(t, "OutputsExist", "s3://someone-elses/out/1/outputs.pb", err)
	refused(t, "Write", other, s.Write(ctx, other, []byte("x")))
	refused(t, "WriteProtobuf", other, s.WriteProtobuf(ctx, other, &core.LiteralMap{}))
	refused(t, "Check", "s3://someone-elses/run/", s.Check("s3://someone-elses/run/"))
	if n := f.askedFor("someone-elses"); n != 0 {
		t.Fatalf("the service was asked %d times for a bucket that is not allowed", n)
	}
	if err := s.Check("s3://flyte-data/p/d/run/"); err != nil {
		t.Fatalf("Check of the container: %v", err)
	}

	// Listed under storage.allowed-containers, it is reachable.
	cfg := f.config("flyte-data")
	cfg.AllowedContainers = []string{"s3://someone-elses"}
	s2 := newStore(t, cfg)
	if b, err := s2.Read(ctx, other); err != nil || string(b) != "someone-elses/secrets/inputs.pb" {
		t.Fatalf("an allowed extra bucket: %q, %v", b, err)
	}
}

// Without a container nothing is reachable: no storage section allows nothing.
func TestNoStorageSectionAllowsNothing(t *testing.T) {
	isolateAWS(t)
	s := newStore(t, config.StorageConfig{})
	_, err := s.Read(context.Background(), "s3://flyte-data/x")
	refused(t, "Read", "s3://flyte-data/x", err)
	if !strings.Contains(err.Error(), "storage.container") {
		t.Fatalf("the message does not name storage.container: %v", err)
	}
}

// file:// reads the executor's own filesystem: an S3 deployment must not
// read (or write) it, whatever a TaskAction names.
func TestFileSchemeOnlyWhenConfigured(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, false)
	s := newStore(t, f.config("flyte-data"))
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("executor's own secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	uri := "file://" + secret
	b, err := s.Read(ctx, uri)
	refused(t, "Read", uri, err)
	if len(b) != 0 {
		t.Fatalf("read %q", b)
	}
	written := "file://" + filepath.Join(dir, "planted")
	refused(t, "Write", written, s.Write(ctx, written, []byte("x")))
	if _, err := os.Stat(filepath.Join(dir, "planted")); !os.IsNotExist(err) {
		t.Fatalf("a file was written: %v", err)
	}
}

// A local storage section allows its container under its root, by either
// spelling, and nothing else of the filesystem.
func TestLocalContainerOnly(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := newStore(t, config.StorageConfig{Type: config.StorageTypeLocal, Container: "meta",
		Stow: config.StowConfig{Kind: config.StowKindLocal, Config: map[string]string{"path": root}}})
	if err := s.Write(ctx, "file://meta/run/inputs.pb", []byte("in")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read(ctx, "file://"+root+"/meta/run/inputs.pb"); err != nil || string(b) != "in" {
		t.Fatalf("the same object by its path: %q, %v", b, err)
	}
	if n := storage.OpenBucketsForTest(s); n != 1 {
		t.Fatalf("%d buckets open for one container", n)
	}
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"file://other/x", "file://" + root + "/secret", "file://" + root + "/metadata/x",
		"file://meta/../secret", "file://" + root + "/meta/../secret"} {
		_, err := s.Read(ctx, uri)
		if !errors.Is(err, storage.ErrLocationNotAllowed) && !errors.Is(err, storage.ErrInvalidURI) {
			t.Errorf("%s: err = %v, want a refusal", uri, err)
		}
	}
}

// An entry of storage.allowed-containers may name a folder of a bucket:
// only keys under it are allowed.
func TestAllowedFolder(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, false)
	cfg := f.config("flyte-data")
	cfg.AllowedContainers = []string{"s3://shared/flyte/"}
	s := newStore(t, cfg)
	if _, err := s.Read(ctx, "s3://shared/flyte/run/inputs.pb"); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"s3://shared/flyteother/x", "s3://shared/other/x", "s3://shared/flyte"} {
		_, err := s.Read(ctx, uri)
		refused(t, "Read", uri, err)
	}
	// Check takes a folder, with or without its slash (a runOutputBase).
	for _, ok := range []string{"s3://shared/flyte", "s3://shared/flyte/", "s3://shared/flyte/run/inputs.pb"} {
		if err := s.Check(ok); err != nil {
			t.Errorf("Check %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"s3://shared", "s3://shared/", "s3://shared/flyteother"} {
		refused(t, "Check", bad, s.Check(bad))
	}
	if _, err := s.Read(ctx, "s3://shared/flyte/../other/x"); !errors.Is(err, storage.ErrInvalidURI) {
		t.Fatalf("a key with ..: %v, want ErrInvalidURI", err)
	}
}

// An Azure URI names its account: the configured container of another
// account is another container.
func TestAzureOtherAccountRefused(t *testing.T) {
	s := newStore(t, config.StorageConfig{Type: config.StorageTypeStow, Container: "meta",
		Stow: config.StowConfig{Kind: config.StowKindAzure, Config: map[string]string{"account": "ours"}}})
	for _, ok := range []string{"abfs://meta@ours.dfs.core.windows.net/run/x", "abfss://meta@ours.dfs.core.windows.net/run/",
		"azblob://meta/run/x", "abfs://meta@OURS.dfs.core.windows.net/x"} {
		if err := s.Check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"abfs://meta@theirs.dfs.core.windows.net/run/x", "abfs://other@ours.dfs.core.windows.net/x"} {
		refused(t, "Check", bad, s.Check(bad))
	}
}

// Each TaskAction naming its own bucket used to open one more bucket for
// good; now only allowed buckets are ever opened.
func TestOpenBucketsBounded(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, false)
	s := newStore(t, f.config("flyte-data"))
	if _, err := s.Read(ctx, "s3://flyte-data/x"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		_, _ = s.ReadInputs(ctx, fmt.Sprintf("s3://bucket-%d/run/a0", i))
	}
	if n := storage.OpenBucketsForTest(s); n != 1 {
		t.Fatalf("%d buckets open after 100 TaskActions naming their own, want 1 (the allowed one)", n)
	}
}
