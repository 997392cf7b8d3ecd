package cachesvc_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	cachev1 "github.com/taskaction/executor/gen/executor/cache/v1"
	"github.com/taskaction/executor/gen/executor/cache/v1/cachev1connect"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/cachesvc"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sqliteStore(t *testing.T, dir string) cachesvc.Store {
	t.Helper()
	s, err := cachesvc.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func goodKey() *cachev1.Key {
	return &cachev1.Key{Project: "p", Domain: "d", TaskName: "t", TaskVersion: "v", CacheKey: "k"}
}

// TestServiceValidation calls the service directly, past the client's own
// checks: the service must refuse bad requests itself, naming the part.
func TestServiceValidation(t *testing.T) {
	inst := cachesvctest.Start(t, cachesvctest.Options{})
	rpc := cachev1connect.NewCacheServiceClient(http.DefaultClient, inst.URL)
	ctx := context.Background()
	without := func(f func(k *cachev1.Key)) *cachev1.Key { k := goodKey(); f(k); return k }
	entry := &cachev1.Entry{OutputUri: "s3://b/o"}

	type call func() error
	get := func(k *cachev1.Key) call {
		return func() error { _, err := rpc.Get(ctx, connect.NewRequest(&cachev1.GetRequest{Key: k})); return err }
	}
	put := func(k *cachev1.Key, e *cachev1.Entry) call {
		return func() error {
			_, err := rpc.Put(ctx, connect.NewRequest(&cachev1.PutRequest{Key: k, Entry: e}))
			return err
		}
	}
	del := func(k *cachev1.Key) call {
		return func() error {
			_, err := rpc.Delete(ctx, connect.NewRequest(&cachev1.DeleteRequest{Key: k}))
			return err
		}
	}
	reserve := func(k *cachev1.Key, owner string, hb *durationpb.Duration) call {
		return func() error {
			_, err := rpc.GetOrExtendReservation(ctx, connect.NewRequest(&cachev1.GetOrExtendReservationRequest{Key: k, Owner: owner, HeartbeatInterval: hb}))
			return err
		}
	}
	release := func(k *cachev1.Key, owner string) call {
		return func() error {
			_, err := rpc.ReleaseReservation(ctx, connect.NewRequest(&cachev1.ReleaseReservationRequest{Key: k, Owner: owner}))
			return err
		}
	}
	cases := []struct {
		name    string
		call    call
		wantErr string
	}{
		{"get without a key", get(nil), "key is required"},
		{"get without a project", get(without(func(k *cachev1.Key) { k.Project = "" })), "key.project is required"},
		{"get without a domain", get(without(func(k *cachev1.Key) { k.Domain = "" })), "key.domain is required"},
		{"put without a task name", put(without(func(k *cachev1.Key) { k.TaskName = "" }), entry), "key.task_name is required"},
		{"delete without a task version", del(without(func(k *cachev1.Key) { k.TaskVersion = "" })), "key.task_version is required"},
		{"reserve without a cache key", reserve(without(func(k *cachev1.Key) { k.CacheKey = "" }), "o", nil), "key.cache_key is required"},
		{"release with NUL in the project", release(without(func(k *cachev1.Key) { k.Project = "a\x00" }), "o"), "key.project contains a NUL byte"},
		{"put without an entry", put(goodKey(), nil), "entry is required"},
		{"put without an output URI", put(goodKey(), &cachev1.Entry{Source: &cachev1.Source{Run: "r"}}), "entry.output_uri is required"},
		{"reserve without an owner", reserve(goodKey(), "", nil), "owner is required"},
		{"release without an owner", release(goodKey(), ""), "owner is required"},
		{"reserve with a negative heartbeat", reserve(goodKey(), "o", durationpb.New(-time.Second)), "heartbeat_interval -1s is negative"},
		{"reserve with a malformed heartbeat", reserve(goodKey(), "o", &durationpb.Duration{Seconds: 1, Nanos: -5}), "heartbeat_interval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v (code %v), want INVALID_ARGUMENT containing %q", err, connect.CodeOf(err), tc.wantErr)
			}
		})
	}
}

// TestServiceCodes checks the codes callers act on, over the Connect and
// the gRPC protocols (the latter on cleartext HTTP/2).
func TestServiceCodes(t *testing.T) {
	inst := cachesvctest.Start(t, cachesvctest.Options{})
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	protocols := map[string]cachev1connect.CacheServiceClient{
		"connect": cachev1connect.NewCacheServiceClient(http.DefaultClient, inst.URL),
		"grpc":    cachev1connect.NewCacheServiceClient(&http.Client{Transport: &http.Transport{Protocols: h2c}}, inst.URL, connect.WithGRPC()),
	}
	ctx := context.Background()
	for name, rpc := range protocols {
		t.Run(name, func(t *testing.T) {
			key := goodKey()
			key.CacheKey = name
			_, err := rpc.Get(ctx, connect.NewRequest(&cachev1.GetRequest{Key: key}))
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("get of a missing entry: %v, want NOT_FOUND", err)
			}
			put := connect.NewRequest(&cachev1.PutRequest{Key: key, Entry: &cachev1.Entry{OutputUri: "s3://b/o"}})
			resp, err := rpc.Put(ctx, put)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if resp.Msg.GetEntry().GetCreatedAt() == nil {
				t.Fatal("put: the stored entry has no creation time")
			}
			if _, err := rpc.Put(ctx, put); connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatalf("second put: %v, want ALREADY_EXISTS", err)
			}
			put.Msg.Overwrite = true
			if _, err := rpc.Put(ctx, put); err != nil {
				t.Fatalf("overwrite: %v", err)
			}
			r, err := rpc.GetOrExtendReservation(ctx, connect.NewRequest(&cachev1.GetOrExtendReservationRequest{Key: key, Owner: "a"}))
			if err != nil {
				t.Fatalf("reserve: %v", err)
			}
			if got := r.Msg.GetReservation(); got.GetOwner() != "a" || got.GetKey().GetCacheKey() != name ||
				got.GetHeartbeatInterval().AsDuration() != cachesvc.DefaultHeartbeat {
				t.Fatalf("reserve: got %v", got)
			}
		})
	}

	t.Run("a failing store is UNAVAILABLE, and /healthz says so", func(t *testing.T) {
		st := sqliteStore(t, t.TempDir())
		inst := cachesvctest.Start(t, cachesvctest.Options{Store: st})
		if code := healthz(t, inst.URL); code != http.StatusOK {
			t.Fatalf("healthz: %d", code)
		}
		_ = st.Close()
		c := cache.NewClient(inst.URL, nil)
		_, err := c.Get(ctx, cache.KeyFromProto(goodKey()))
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("get on a closed store: %v, want UNAVAILABLE", err)
		}
		if code := healthz(t, inst.URL); code != http.StatusServiceUnavailable {
			t.Fatalf("healthz on a closed store: %d, want 503", code)
		}
	})
}

func healthz(t *testing.T, baseURL string) int {
	t.Helper()
	resp, err := http.Get(baseURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestServerStartWait(t *testing.T) {
	st := sqliteStore(t, t.TempDir())
	srv := cachesvc.NewServer(st, cachesvc.ServerOptions{Listen: "127.0.0.1:0"})
	if err := srv.Wait(); err == nil {
		t.Fatal("Wait before Start: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err == nil {
		t.Fatal("second Start: want an error")
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || strings.HasSuffix(srv.URL(), ":0") {
		t.Fatalf("URL %q is not the bound address", srv.URL())
	}
	// Start returned, so the service answers now, with no wait.
	if code := healthz(t, srv.URL()); code != http.StatusOK {
		t.Fatalf("healthz: %d", code)
	}
	if _, err := cache.NewClient(srv.URL(), nil).Get(ctx, cache.KeyFromProto(goodKey())); err != nil {
		t.Fatal(err)
	}
	cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop after its context ended")
	}
	if _, err := http.Get(srv.URL() + "/healthz"); err == nil {
		t.Fatal("still serving after stop")
	}

	// A taken address fails Start itself, not later.
	other := cachesvc.NewServer(st, cachesvc.ServerOptions{Listen: "127.0.0.1:0"})
	if err := other.Listen(); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	t.Cleanup(func() { _ = other.Run(stopped) }) // closes its listener
	busy := cachesvc.NewServer(st, cachesvc.ServerOptions{Listen: other.Addr()})
	if err := busy.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Start on a taken address: %v, want a listen error", err)
	}
}
