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

	"google.golang.org/protobuf/proto"

	cachepb "github.com/taskaction/executor/gen/flyteidl2/cacheservice"
	cachev2 "github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2"
	"github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2/cacheservicev2connect"
	"github.com/taskaction/executor/gen/flyteidl2/core"
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

func goodID() *cachev2.Identifier {
	return &cachev2.Identifier{Org: "o", Project: "p", Domain: "d"}
}

func goodKey() cache.Key { return cache.KeyFromProto(goodID(), "k") }

// TestServiceValidation calls the service directly, past the client's own
// checks: the service must refuse bad requests itself, naming the part.
func TestServiceValidation(t *testing.T) {
	inst := cachesvctest.Start(t, cachesvctest.Options{})
	rpc := cacheservicev2connect.NewCacheServiceClient(http.DefaultClient, inst.URL)
	ctx := context.Background()
	without := func(f func(id *cachev2.Identifier)) *cachev2.Identifier { id := goodID(); f(id); return id }
	output := &cachepb.CachedOutput{Output: &cachepb.CachedOutput_OutputUri{OutputUri: "s3://b/o"}}

	type call func() error
	get := func(id *cachev2.Identifier, base *cachepb.GetCacheRequest) call {
		return func() error {
			_, err := rpc.Get(ctx, connect.NewRequest(&cachev2.GetCacheRequest{BaseRequest: base, Identifier: id}))
			return err
		}
	}
	put := func(id *cachev2.Identifier, key string, o *cachepb.CachedOutput, ow *cachepb.OverwriteOutput) call {
		return func() error {
			_, err := rpc.Put(ctx, connect.NewRequest(&cachev2.PutCacheRequest{
				BaseRequest: &cachepb.PutCacheRequest{Key: key, Output: o, Overwrite: ow}, Identifier: id}))
			return err
		}
	}
	del := func(id *cachev2.Identifier, key string) call {
		return func() error {
			_, err := rpc.Delete(ctx, connect.NewRequest(&cachev2.DeleteCacheRequest{
				BaseRequest: &cachepb.DeleteCacheRequest{Key: key}, Identifier: id}))
			return err
		}
	}
	reserve := func(id *cachev2.Identifier, key, owner string, hb *durationpb.Duration) call {
		return func() error {
			_, err := rpc.GetOrExtendReservation(ctx, connect.NewRequest(&cachev2.GetOrExtendReservationRequest{
				BaseRequest: &cachepb.GetOrExtendReservationRequest{Key: key, OwnerId: owner, HeartbeatInterval: hb}, Identifier: id}))
			return err
		}
	}
	release := func(id *cachev2.Identifier, key, owner string) call {
		return func() error {
			_, err := rpc.ReleaseReservation(ctx, connect.NewRequest(&cachev2.ReleaseReservationRequest{
				BaseRequest: &cachepb.ReleaseReservationRequest{Key: key, OwnerId: owner}, Identifier: id}))
			return err
		}
	}
	cases := []struct {
		name    string
		call    call
		wantErr string
	}{
		{"get without an identifier", get(nil, &cachepb.GetCacheRequest{Key: "k"}), "identifier is required"},
		{"get without a base request", get(goodID(), nil), "base_request is required"},
		{"get without a project", get(without(func(id *cachev2.Identifier) { id.Project = "" }), &cachepb.GetCacheRequest{Key: "k"}), "identifier.project is required"},
		{"put without a domain", put(without(func(id *cachev2.Identifier) { id.Domain = "" }), "k", output, nil), "identifier.domain is required"},
		{"delete without a key", del(goodID(), ""), "base_request.key is required"},
		{"reserve with a key too long", reserve(goodID(), strings.Repeat("k", cache.MaxKeyBytes+1), "o", nil), "base_request.key is 1537 bytes"},
		{"release with NUL in the project", release(without(func(id *cachev2.Identifier) { id.Project = "a\x00" }), "k", "o"), "identifier.project contains a NUL byte"},
		{"put without an output", put(goodID(), "k", nil, nil), "base_request.output is required"},
		{"put without an output URI", put(goodID(), "k", &cachepb.CachedOutput{}, nil), "output_uri is required"},
		{"put with inline literals", put(goodID(), "k", &cachepb.CachedOutput{Output: &cachepb.CachedOutput_OutputLiterals{OutputLiterals: &core.LiteralMap{}}}, nil), "inline output literals"},
		{"put with a negative max age", put(goodID(), "k", output, &cachepb.OverwriteOutput{MaxAge: durationpb.New(-time.Second)}), "max_age"},
		{"reserve without an owner", reserve(goodID(), "k", "", nil), "owner_id is required"},
		{"release without an owner", release(goodID(), "k", ""), "owner_id is required"},
		{"reserve with a negative heartbeat", reserve(goodID(), "k", "o", durationpb.New(-time.Second)), "heartbeat_interval -1s is negative"},
		{"reserve with a malformed heartbeat", reserve(goodID(), "k", "o", &durationpb.Duration{Seconds: 1, Nanos: -5}), "heartbeat_interval"},
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

// TestServiceWithoutOrg: Flyte's executor scopes a task whose identifier has
// no org by an identifier without one ({project, domain}); the service takes
// every RPC so, and keeps the entry apart from the same key in an org.
func TestServiceWithoutOrg(t *testing.T) {
	rpc := cacheservicev2connect.NewCacheServiceClient(http.DefaultClient, cachesvctest.Start(t, cachesvctest.Options{}).URL)
	ctx := context.Background()
	id := &cachev2.Identifier{Project: "flytesnacks", Domain: "development"}
	const key = "t/u6UXWC1D6rbxdwbcM4VJq6C7ToarKCYg9RhUcm+WQ=-WNyXrUZC-J2qAfV9C-vvL3cM1mzryVioHUaWRlm03TAw_yBloq986VtCEq33M-v1"
	get := func(id *cachev2.Identifier) (*connect.Response[cachepb.GetCacheResponse], error) {
		return rpc.Get(ctx, connect.NewRequest(&cachev2.GetCacheRequest{BaseRequest: &cachepb.GetCacheRequest{Key: key}, Identifier: id}))
	}
	if _, err := get(id); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get of a missing entry: %v, want NOT_FOUND", err)
	}
	if _, err := rpc.Put(ctx, connect.NewRequest(&cachev2.PutCacheRequest{Identifier: id, BaseRequest: &cachepb.PutCacheRequest{
		Key: key, Output: &cachepb.CachedOutput{Output: &cachepb.CachedOutput_OutputUri{OutputUri: "s3://b/o"}}}})); err != nil {
		t.Fatalf("put: %v", err)
	}
	if resp, err := get(id); err != nil || resp.Msg.GetOutput().GetOutputUri() != "s3://b/o" {
		t.Fatalf("get: %v %v", resp, err)
	}
	if _, err := get(&cachev2.Identifier{Org: "local", Project: "flytesnacks", Domain: "development"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get in org local: %v, want NOT_FOUND", err)
	}
	r, err := rpc.GetOrExtendReservation(ctx, connect.NewRequest(&cachev2.GetOrExtendReservationRequest{Identifier: id,
		BaseRequest: &cachepb.GetOrExtendReservationRequest{Key: key, OwnerId: "ns/ta"}}))
	if err != nil || r.Msg.GetReservation().GetOwnerId() != "ns/ta" {
		t.Fatalf("reserve: %v %v", r, err)
	}
	if _, err := rpc.ReleaseReservation(ctx, connect.NewRequest(&cachev2.ReleaseReservationRequest{Identifier: id,
		BaseRequest: &cachepb.ReleaseReservationRequest{Key: key, OwnerId: "ns/ta"}})); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := rpc.Delete(ctx, connect.NewRequest(&cachev2.DeleteCacheRequest{Identifier: id,
		BaseRequest: &cachepb.DeleteCacheRequest{Key: key}})); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// TestServiceRoundTrips drives every RPC with messages built from the
// flyteidl2 protos, over the Connect and the gRPC protocols (the latter on
// cleartext HTTP/2), and checks the codes callers act on.
func TestServiceRoundTrips(t *testing.T) {
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	protocols := map[string]func(url string) cacheservicev2connect.CacheServiceClient{
		"connect": func(url string) cacheservicev2connect.CacheServiceClient {
			return cacheservicev2connect.NewCacheServiceClient(http.DefaultClient, url)
		},
		"grpc": func(url string) cacheservicev2connect.CacheServiceClient {
			return cacheservicev2connect.NewCacheServiceClient(&http.Client{Transport: &http.Transport{Protocols: h2c}}, url, connect.WithGRPC())
		},
	}
	ctx := context.Background()
	for name, newClient := range protocols {
		t.Run(name, func(t *testing.T) {
			clock := cachesvctest.NewClock(t0)
			rpc := newClient(cachesvctest.Start(t, cachesvctest.Options{Clock: clock}).URL)
			id := goodID()
			key := "key-" + name
			get := connect.NewRequest(&cachev2.GetCacheRequest{BaseRequest: &cachepb.GetCacheRequest{Key: key}, Identifier: id})
			if _, err := rpc.Get(ctx, get); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("get of a missing entry: %v, want NOT_FOUND", err)
			}
			task := &core.Identifier{ResourceType: core.ResourceType_TASK, Org: "o", Project: "p", Domain: "d", Name: "t", Version: "v3"}
			meta := &cachepb.Metadata{SourceIdentifier: task, KeyMap: &cachepb.KeyMapMetadata{Values: map[string]string{
				"task-version": "v3", "execution-name": "run1", "exec-node": "a0", "exec-attempt": "1",
				"exec-project": "p", "exec-domain": "d", "exec-org": "o"}}}
			put := connect.NewRequest(&cachev2.PutCacheRequest{Identifier: id, BaseRequest: &cachepb.PutCacheRequest{
				Key: key, Output: &cachepb.CachedOutput{Output: &cachepb.CachedOutput_OutputUri{OutputUri: "s3://b/first"}, Metadata: meta}}})
			if _, err := rpc.Put(ctx, put); err != nil {
				t.Fatalf("put: %v", err)
			}
			resp, err := rpc.Get(ctx, get)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			out := resp.Msg.GetOutput()
			if out.GetOutputUri() != "s3://b/first" || !proto.Equal(out.GetMetadata().GetSourceIdentifier(), task) ||
				out.GetMetadata().GetKeyMap().GetValues()["exec-attempt"] != "1" ||
				!out.GetMetadata().GetCreatedAt().AsTime().Equal(t0) || !out.GetMetadata().GetLastUpdatedAt().AsTime().Equal(t0) {
				t.Fatalf("get returned %v", out)
			}
			if _, err := rpc.Put(ctx, put); connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatalf("second put: %v, want ALREADY_EXISTS", err)
			}
			clock.Advance(time.Minute)
			// A caller's max age lets it replace an entry older than that.
			put.Msg.BaseRequest.Output.Output = &cachepb.CachedOutput_OutputUri{OutputUri: "s3://b/second"}
			put.Msg.BaseRequest.Overwrite = &cachepb.OverwriteOutput{MaxAge: durationpb.New(2 * time.Minute)}
			if _, err := rpc.Put(ctx, put); connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatalf("put of an entry younger than max_age: %v, want ALREADY_EXISTS", err)
			}
			put.Msg.BaseRequest.Overwrite = &cachepb.OverwriteOutput{MaxAge: durationpb.New(30 * time.Second)}
			if _, err := rpc.Put(ctx, put); err != nil {
				t.Fatalf("put of an entry older than max_age: %v", err)
			}
			clock.Advance(time.Minute)
			put.Msg.BaseRequest.Output.Output = &cachepb.CachedOutput_OutputUri{OutputUri: "s3://b/third"}
			put.Msg.BaseRequest.Overwrite = &cachepb.OverwriteOutput{Overwrite: true}
			if _, err := rpc.Put(ctx, put); err != nil {
				t.Fatalf("overwrite: %v", err)
			}
			resp, err = rpc.Get(ctx, get)
			if err != nil {
				t.Fatalf("get after overwrite: %v", err)
			}
			// Overwriting keeps the key's creation time, as Flyte's service does.
			if m := resp.Msg.GetOutput().GetMetadata(); resp.Msg.GetOutput().GetOutputUri() != "s3://b/third" ||
				!m.GetCreatedAt().AsTime().Equal(t0) || !m.GetLastUpdatedAt().AsTime().Equal(t0.Add(2*time.Minute)) {
				t.Fatalf("after overwrite: %v", resp.Msg.GetOutput())
			}

			reserve := connect.NewRequest(&cachev2.GetOrExtendReservationRequest{Identifier: id,
				BaseRequest: &cachepb.GetOrExtendReservationRequest{Key: key, OwnerId: "a"}})
			r, err := rpc.GetOrExtendReservation(ctx, reserve)
			if err != nil {
				t.Fatalf("reserve: %v", err)
			}
			if got := r.Msg.GetReservation(); got.GetOwnerId() != "a" || got.GetKey() != key ||
				got.GetHeartbeatInterval().AsDuration() != cachesvc.DefaultHeartbeat ||
				!got.GetExpiresAt().AsTime().Equal(clock.Now().Add(cachesvc.GraceMultiplier*cachesvc.DefaultHeartbeat)) {
				t.Fatalf("reserve: got %v", got)
			}
			reserve.Msg.BaseRequest.OwnerId = "b"
			if r, err := rpc.GetOrExtendReservation(ctx, reserve); err != nil || r.Msg.GetReservation().GetOwnerId() != "a" {
				t.Fatalf("reserve by another owner: %v %v, want a's reservation", r, err)
			}
			release := connect.NewRequest(&cachev2.ReleaseReservationRequest{Identifier: id,
				BaseRequest: &cachepb.ReleaseReservationRequest{Key: key, OwnerId: "a"}})
			if _, err := rpc.ReleaseReservation(ctx, release); err != nil {
				t.Fatalf("release: %v", err)
			}
			if r, err := rpc.GetOrExtendReservation(ctx, reserve); err != nil || r.Msg.GetReservation().GetOwnerId() != "b" {
				t.Fatalf("reserve after release: %v %v, want b's", r, err)
			}

			del := connect.NewRequest(&cachev2.DeleteCacheRequest{Identifier: id, BaseRequest: &cachepb.DeleteCacheRequest{Key: key}})
			if _, err := rpc.Delete(ctx, del); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := rpc.Delete(ctx, del); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("delete of a missing entry: %v, want NOT_FOUND", err)
			}
			if _, err := rpc.Get(ctx, get); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("get after delete: %v, want NOT_FOUND", err)
			}
			// The scope is part of the key.
			if _, err := rpc.Put(ctx, put); err != nil {
				t.Fatal(err)
			}
			other := connect.NewRequest(&cachev2.GetCacheRequest{BaseRequest: &cachepb.GetCacheRequest{Key: key},
				Identifier: &cachev2.Identifier{Org: "o2", Project: "p", Domain: "d"}})
			if _, err := rpc.Get(ctx, other); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("get in another org: %v, want NOT_FOUND", err)
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
		_, err := c.Get(ctx, goodKey())
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
	if _, err := cache.NewClient(srv.URL(), nil).Get(ctx, goodKey()); err != nil {
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
