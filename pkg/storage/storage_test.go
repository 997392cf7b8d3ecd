package storage_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/storage"
)

func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		uri     string
		want    storage.Location
		wantErr string
	}{
		{uri: "s3://bucket/a/b/inputs.pb", want: storage.Location{Scheme: "s3", Bucket: "bucket", Key: "a/b/inputs.pb"}},
		{uri: "gs://b/k", want: storage.Location{Scheme: "gs", Bucket: "b", Key: "k"}},
		{uri: "azblob://container/x/y", want: storage.Location{Scheme: "azblob", Bucket: "container", Key: "x/y"}},
		{uri: "abfs://data@acct.dfs.core.windows.net/run/x", want: storage.Location{Scheme: "abfs", Bucket: "data", Account: "acct", Key: "run/x"}},
		{uri: "abfss://data@acct.dfs.core.windows.net/x", want: storage.Location{Scheme: "abfss", Bucket: "data", Account: "acct", Key: "x"}},
		{uri: "file:///tmp/data/x.pb", want: storage.Location{Scheme: "file", Bucket: "/tmp", Key: "data/x.pb"}},
		{uri: "file:///x.pb", wantErr: "names no object"},
		{uri: "file://bucket/x.pb", want: storage.Location{Scheme: "file", Bucket: "bucket", Key: "x.pb"}},
		{uri: "http://host/x", wantErr: "unsupported scheme"},
		{uri: "/just/a/path", wantErr: "not a URI"},
		{uri: "s3:///key", wantErr: "names no bucket"},
		{uri: "s3://bucket", wantErr: "names no object"},
		{uri: "abfs://acct.dfs.core.windows.net/x", wantErr: "container@account"},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			got, err := storage.ParseURI(tc.uri)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, storage.ErrInvalidURI) {
					t.Fatalf("err = %v, want %q wrapping ErrInvalidURI", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func newStore(t *testing.T, cfg config.StorageConfig) *storage.Store {
	t.Helper()
	s, err := storage.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func intLiteral(v int64) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: v}}}}}}
}

// runtimeInputs is an inputs file as Flyte writes it (a flyteidl2.task.Inputs:
// repeated {name 1, value 2} literals, and a context of key/value pairs at 2),
// encoded here field by field.
func runtimeInputs(t *testing.T, named map[string]*core.Literal) []byte {
	t.Helper()
	var b []byte
	for name, lit := range named {
		v, err := proto.Marshal(lit)
		if err != nil {
			t.Fatal(err)
		}
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, name)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, v)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	var kv []byte
	kv = protowire.AppendTag(kv, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "trace")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendString(kv, "on")
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, kv)
}

func TestFileBucketTaskContract(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := newStore(t, config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"file://" + root},
		Stow: config.StowConfig{Kind: config.StowKindLocal, Config: map[string]string{"path": root}}})
	prefix := "file://" + root + "/proj/dev/run1/a0"

	t.Run("inputs written by the runtime read as a LiteralMap", func(t *testing.T) {
		data := runtimeInputs(t, map[string]*core.Literal{"n": intLiteral(7), "m": intLiteral(8)})
		if err := os.MkdirAll(filepath.Join(root, "proj/dev/run1/a0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "proj/dev/run1/a0/inputs.pb"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, inputURI := range []string{prefix, prefix + "/inputs.pb"} {
			m, err := s.ReadInputs(ctx, inputURI)
			if err != nil {
				t.Fatalf("%s: %v", inputURI, err)
			}
			if len(m.GetLiterals()) != 2 || m.GetLiterals()["n"].GetScalar().GetPrimitive().GetInteger() != 7 {
				t.Fatalf("%s: got %v", inputURI, m)
			}
		}
		if _, err := s.ReadInputs(ctx, prefix+"/missing"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("missing inputs: %v, want ErrNotFound", err)
		}
	})

	t.Run("outputs exist once written", func(t *testing.T) {
		out := prefix + "/1"
		if ok, err := s.OutputsExist(ctx, out); err != nil || ok {
			t.Fatalf("before: %v %v", ok, err)
		}
		if err := s.WriteProtobuf(ctx, out+"/outputs.pb", &core.LiteralMap{Literals: map[string]*core.Literal{"o0": intLiteral(1)}}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.OutputsExist(ctx, out); err != nil || !ok {
			t.Fatalf("after: %v %v", ok, err)
		}
		// The runtime reads what the executor writes with plain file I/O: no sidecar files.
		entries, err := os.ReadDir(filepath.Join(root, "proj/dev/run1/a0/1"))
		if err != nil || len(entries) != 1 || entries[0].Name() != "outputs.pb" {
			t.Fatalf("directory holds %v (%v), want only outputs.pb", entries, err)
		}
	})

	t.Run("error.pb decides recoverability and origin", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			doc  *core.ErrorDocument // nil: no file
			want storage.TaskError
		}{
			{"no error.pb", nil, storage.TaskError{Code: storage.CodeErrorFileNotFound, Kind: core.ExecutionError_SYSTEM, Recoverable: true}},
			{"an empty document", &core.ErrorDocument{}, storage.TaskError{Code: storage.CodeErrorFileBadFormat, Kind: core.ExecutionError_SYSTEM, Recoverable: true}},
			{"a non-recoverable user error", &core.ErrorDocument{Error: &core.ContainerError{Code: "USER:ValueError", Message: "bad input",
				Kind: core.ContainerError_NON_RECOVERABLE, Origin: core.ExecutionError_USER}},
				storage.TaskError{Code: "USER:ValueError", Message: "bad input", Kind: core.ExecutionError_USER}},
			{"a recoverable system error", &core.ErrorDocument{Error: &core.ContainerError{Code: "SYSTEM:Net", Message: "reset",
				Kind: core.ContainerError_RECOVERABLE, Origin: core.ExecutionError_SYSTEM}},
				storage.TaskError{Code: "SYSTEM:Net", Message: "reset", Kind: core.ExecutionError_SYSTEM, Recoverable: true}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out := prefix + "/err-" + strings.ReplaceAll(tc.name, " ", "-")
				if tc.doc != nil {
					if err := s.WriteProtobuf(ctx, out+"/error.pb", tc.doc); err != nil {
						t.Fatal(err)
					}
				}
				if has, err := s.HasTaskError(ctx, out); err != nil || has != (tc.doc != nil) {
					t.Fatalf("HasTaskError = %v, %v", has, err)
				}
				got, err := s.ReadTaskError(ctx, out)
				if err != nil {
					t.Fatal(err)
				}
				if tc.want.Message == "" {
					got.Message = "" // generated text naming the path
				}
				if got != tc.want {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			})
		}
	})

	t.Run("a file that is not the message is an error", func(t *testing.T) {
		if err := s.Write(ctx, prefix+"/junk/error.pb", []byte{0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadTaskError(ctx, prefix+"/junk"); err == nil || !strings.Contains(err.Error(), "is not a flyteidl2.core.ErrorDocument") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("a named bucket lives under the local root", func(t *testing.T) {
		if err := s.Write(ctx, "file://my-bucket/k/v.pb", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "my-bucket/k/v.pb")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestReadLimit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := newStore(t, config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"file://" + root},
		Limits: config.StorageLimits{GetLimitMegabytes: 1}})
	big := make([]byte, 1<<20+1)
	uri := "file://" + root + "/big.pb"
	if err := s.Write(ctx, uri, big); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, uri); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if err := s.Write(ctx, uri, big[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read(ctx, uri); err != nil || len(b) != 1<<20 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
}

// A file URI cannot climb out of its bucket: a path with .. is refused.
func TestFileURIStaysInItsBucket(t *testing.T) {
	root := t.TempDir()
	s := newStore(t, config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"file://bucket"},
		Stow: config.StowConfig{Kind: config.StowKindLocal, Config: map[string]string{"path": root}}})
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"file://bucket/../secret", "file://bucket/a/../../secret", "file://bucket/%2e%2e/secret",
		"file://" + root + "/bucket/../secret"} {
		if _, err := s.Read(context.Background(), uri); !errors.Is(err, storage.ErrInvalidURI) {
			t.Errorf("%s: err = %v, want ErrInvalidURI", uri, err)
		}
	}
}

// file://name lives under the local root: allowing one without a root is a
// configuration error.
func TestLocalBucketNeedsARoot(t *testing.T) {
	_, err := storage.New(config.StorageConfig{Type: config.StorageTypeS3, AllowedContainers: []string{"file://bucket"}})
	if err == nil || !strings.Contains(err.Error(), "local root") || !strings.Contains(err.Error(), "storage.allowed-containers") {
		t.Fatalf("err = %v", err)
	}
}

// An S3 outage is an error the caller sees in bounded time, never a hang nor
// a "not found".
func TestS3OutageIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<Error><Code>ServiceUnavailable</Code></Error>", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	for name, endpoint := range map[string]string{"nothing listening": "http://" + closed, "503 from the service": failing.URL} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, config.StorageConfig{Type: config.StorageTypeS3, Stow: config.StowConfig{Kind: "s3", Config: map[string]string{
				"endpoint": endpoint, "auth_type": "accesskey", "access_key_id": "id", "secret_key": "secret", "region": "us-east-1"}}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := s.ReadInputs(ctx, "s3://bucket/run/a0")
			if err == nil || errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("read: %v, want an outage error", err)
			}
			if ctx.Err() != nil {
				t.Fatalf("the call ran into the test's deadline: %v", err)
			}
			if _, err := s.OutputsExist(ctx, "s3://bucket/run/a0/1"); err == nil {
				t.Fatal("exists: want an error")
			}
		})
	}
}

func TestS3Settings(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(keyFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		settings map[string]string
		want     storage.S3Options
		wantErr  string
	}{
		{"defaults: AWS, us-east-1, default credentials", nil, storage.S3Options{Region: "us-east-1"}, ""},
		{"an S3-compatible endpoint uses path-style", map[string]string{"endpoint": "minio:9000", "disable_ssl": "true", "region": "eu-west-1"},
			storage.S3Options{Region: "eu-west-1", Endpoint: "http://minio:9000", PathStyle: true}, ""},
		{"an endpoint without disable_ssl is https", map[string]string{"endpoint": "s3.example.com"},
			storage.S3Options{Region: "us-east-1", Endpoint: "https://s3.example.com", PathStyle: true}, ""},
		{"an endpoint with a scheme is kept", map[string]string{"endpoint": "http://x:1"},
			storage.S3Options{Region: "us-east-1", Endpoint: "http://x:1", PathStyle: true}, ""},
		{"access keys", map[string]string{"auth_type": "accesskey", "access_key_id": "AK", "secret_key": "SK"},
			storage.S3Options{Region: "us-east-1", AccessKeyID: "AK", SecretKey: "SK"}, ""},
		{"a secret key file wins", map[string]string{"auth_type": "accesskey", "access_key_id": "AK", "secret_key": "SK", "secret_key_path": keyFile},
			storage.S3Options{Region: "us-east-1", AccessKeyID: "AK", SecretKey: "from-file"}, ""},
		{"access keys missing", map[string]string{"auth_type": "accesskey"}, storage.S3Options{}, "needs access_key_id"},
		{"unknown auth type", map[string]string{"auth_type": "magic"}, storage.S3Options{}, "want iam or accesskey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := storage.S3Settings(tc.settings)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
