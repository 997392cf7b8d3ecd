package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
)

// The local bucket is a directory of the data directory, reachable as
// file://<bucket name>; nothing else of the filesystem is.
func TestLocalBucket(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.New(local.StorageConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	inputs := &core.LiteralMap{Literals: map[string]*core.Literal{"x": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: "v"}}}}}}}}
	if err := s.WriteProtobuf(ctx, local.BucketURI(dir)+"/run1/inputs.pb", inputs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, local.BucketDir, "run1", "inputs.pb")); err != nil {
		t.Fatalf("not under the data directory: %v", err)
	}
	got, err := s.ReadInputs(ctx, local.BucketURI(dir)+"/run1")
	if err != nil || got.GetLiterals()["x"].GetScalar().GetPrimitive().GetStringValue() != "v" {
		t.Fatalf("read back: %v %v", got, err)
	}
	if err := s.Write(ctx, "file://named/k.pb", []byte("x")); !errors.Is(err, storage.ErrLocationNotAllowed) {
		t.Fatalf("another bucket of the local root: %v, want refused", err)
	}
	ta := &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r-a0"},
		Spec: flytev1.TaskActionSpec{ActionName: "a0", RunOutputBase: local.BucketURI(dir) + "/proj/dev/r/"}}
	if err := s.Write(ctx, task.ErrorURI(ta, 1), []byte("x")); err != nil {
		t.Fatalf("an attempt's output prefix (sharded) is outside the local bucket: %v", err)
	}
}

// The demo's samples name a cloud bucket: their URIs are moved into the
// local bucket, keeping the paths (and a folder's trailing slash).
func TestRebaseSample(t *testing.T) {
	base := local.BucketURI("/data")
	ta := &flytev1.TaskAction{Spec: flytev1.TaskActionSpec{
		InputURI: "s3://my-bucket/sample-run/hello/inputs.pb", RunOutputBase: "s3://my-bucket/sample-run/"}}
	local.RebaseSample(ta, base)
	if ta.Spec.InputURI != base+"/sample-run/hello/inputs.pb" || ta.Spec.RunOutputBase != base+"/sample-run/" {
		t.Fatalf("rebased to %q, %q", ta.Spec.InputURI, ta.Spec.RunOutputBase)
	}
	bad := &flytev1.TaskAction{Spec: flytev1.TaskActionSpec{InputURI: "not a uri", RunOutputBase: ""}}
	local.RebaseSample(bad, base)
	if bad.Spec.InputURI != "not a uri" || bad.Spec.RunOutputBase != "" {
		t.Fatalf("an unparsable URI must be left alone: %q %q", bad.Spec.InputURI, bad.Spec.RunOutputBase)
	}
	// Flyte's defaults (S3, no bucket) are no storage section: the local
	// bucket is used then.
	if local.StorageConfigured(config.Default().Storage) || !local.StorageConfigured(local.StorageConfig("/data")) {
		t.Fatal("StorageConfigured")
	}
}
