package eventsvc_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv2 "github.com/taskaction/executor/gen/executor/events/v2"
	"github.com/taskaction/executor/gen/executor/events/v2/eventsv2connect"
	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/task"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

// startServer runs eventsvc.Server itself (not the test harness) on a free port.
func startServer(t *testing.T, store eventsvc.Store) *eventsvc.Server {
	t.Helper()
	srv := eventsvc.NewServer(store, eventsvc.ServerOptions{Listen: "127.0.0.1:0"})
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return srv
}

func sqliteStore(t *testing.T) eventsvc.Store {
	t.Helper()
	s, err := eventsvc.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clients talks to both sides of the service: Flyte's Record and our reads.
type clients struct {
	workflowconnect.EventsProxyServiceClient
	eventsv2connect.EventsQueryServiceClient
}

func newClients(url string, h *http.Client, opts ...connect.ClientOption) clients {
	return clients{events.NewClient(url, h, opts...), events.NewQueryClient(url, h, opts...)}
}

func record(t *testing.T, c workflowconnect.EventsProxyServiceClient, evs ...*workflow.ActionEvent) {
	t.Helper()
	if _, err := c.Record(context.Background(), connect.NewRequest(&workflow.RecordRequest{Events: evs})); err != nil {
		t.Fatalf("record: %v", err)
	}
}

func TestRecordValidation(t *testing.T) {
	store := sqliteStore(t)
	srv := startServer(t, store)
	c := newClients(srv.URL(), nil)
	good := ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	noRun := ev("", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	zeroAttempt := ev("r", "b", 0, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	noPhase := ev("r", "c", 1, common.ActionPhase_ACTION_PHASE_UNSPECIFIED, 0, "")
	badKind := ev("r", "d", 1, common.ActionPhase_ACTION_PHASE_FAILED, 0, "")
	badKind.ErrorInfo.Kind = 7
	noTime := ev("r", "e", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	noTime.UpdatedTime = nil

	cases := []struct {
		name    string
		batch   []*workflow.ActionEvent
		wantErr []string // substrings of the error; nil: success
	}{
		{"missing identity", []*workflow.ActionEvent{good, noRun}, []string{"event 1", "missing run"}},
		{"attempt 0", []*workflow.ActionEvent{zeroAttempt}, []string{"attempt must be at least 1"}},
		{"unspecified phase", []*workflow.ActionEvent{noPhase}, []string{"not a reportable phase"}},
		{"unknown error kind", []*workflow.ActionEvent{badKind}, []string{"unknown error kind 7"}},
		{"missing time", []*workflow.ActionEvent{noTime}, []string{"missing updated time"}},
		{"several invalid are all named", []*workflow.ActionEvent{zeroAttempt, good, noRun}, []string{"2 of 3", "event 0", "event 2"}},
		{"an empty batch is refused, as at Flyte's service", nil, []string{"at least one event"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Record(context.Background(), connect.NewRequest(&workflow.RecordRequest{Events: tc.batch}))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("code %v (%v), want InvalidArgument", connect.CodeOf(err), err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// Nothing of an invalid batch is stored, not even its valid events.
			got, lerr := store.List(context.Background(), eventsvc.Query{Run: "r", Limit: 10})
			if lerr != nil || len(got) != 0 {
				t.Fatalf("stored %d events of a refused batch (%v)", len(got), lerr)
			}
		})
	}
}

func TestRecordIdempotentOverHTTP(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	c := newClients(srv.URL(), nil)
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "first"), ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, ""))
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "second"))
	resp, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{Run: "r"}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Msg.GetEvents()); n != 2 || marker(resp.Msg.GetEvents()[0]) != "first" {
		t.Fatalf("got %d events, first %q", n, marker(resp.Msg.GetEvents()[0]))
	}
}

func TestListPaging(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	c := newClients(srv.URL(), nil)
	var batch []*workflow.ActionEvent
	for i := range 23 {
		batch = append(batch, ev("r", fmt.Sprintf("a%d", i%2), 1, common.ActionPhase_ACTION_PHASE_RUNNING, uint32(i), ""))
	}
	record(t, c, batch...)
	cases := []struct {
		name      string
		action    string
		pageSize  uint32
		wantPages []int
	}{
		{"whole run in pages of 10", "", 10, []int{10, 10, 3}},
		{"exact multiple ends with a short token-less page", "a1", 11, []int{11}},
		{"one action", "a0", 5, []int{5, 5, 2}},
		{"default page size", "", 0, []int{23}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pages []int
			token := ""
			for range 10 {
				resp, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{
					Project: "p", Domain: "d", Run: "r", Action: tc.action, PageSize: tc.pageSize, PageToken: token}))
				if err != nil {
					t.Fatal(err)
				}
				pages = append(pages, len(resp.Msg.GetEvents()))
				if token = resp.Msg.GetNextPageToken(); token == "" {
					break
				}
			}
			if fmt.Sprint(pages) != fmt.Sprint(tc.wantPages) {
				t.Errorf("pages %v, want %v", pages, tc.wantPages)
			}
		})
	}
	_, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{Run: "r", PageToken: "x"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("bad token: %v", err)
	}
	_, err = c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("no run: %v", err)
	}
}

func TestWatchSendsStoredThenNew(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	c := newClients(srv.URL(), nil)
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "old"), ev("other", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "x"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.WatchActionEvents(ctx, connect.NewRequest(&eventsv2.WatchActionEventsRequest{Run: "r"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	next := func() string {
		t.Helper()
		if !stream.Receive() {
			t.Fatalf("stream ended: %v", stream.Err())
		}
		return marker(stream.Msg().GetEvent())
	}
	if got := next(); got != "old" {
		t.Fatalf("first %q, want old", got)
	}
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "new1"), ev("other", "b", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "x"))
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "dup"), ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_SUCCEEDED, 0, "new2"))
	for _, want := range []string{"new1", "new2"} {
		if got := next(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestHealthAndProtocols(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	resp, err := http.Get(srv.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	// gRPC needs HTTP/2: cleartext (h2c), as a gRPC client in the cluster would speak it.
	h2c := &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	for name, c := range map[string]clients{
		"connect":  newClients(srv.URL(), nil),
		"grpc":     newClients(srv.URL(), h2c, connect.WithGRPC()),
		"grpc-web": newClients(srv.URL(), nil, connect.WithGRPCWeb()),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Record(context.Background(), connect.NewRequest(&workflow.RecordRequest{
				Events: []*workflow.ActionEvent{ev("proto-"+name, "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "")}}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{Run: "proto-" + name}))
			if err != nil || len(got.Msg.GetEvents()) != 1 {
				t.Fatalf("list: %v", err)
			}
			_, err = c.Record(context.Background(), connect.NewRequest(&workflow.RecordRequest{
				Events: []*workflow.ActionEvent{ev("r", "a", 0, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "")}}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("invalid event over %s: %v", name, err)
			}
		})
	}
}

func TestServerShutdownEndsWatch(t *testing.T) {
	srv := eventsvc.NewServer(sqliteStore(t), eventsvc.ServerOptions{Listen: "127.0.0.1:0"})
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	c := newClients(srv.URL(), nil)
	stream, err := c.WatchActionEvents(context.Background(), connect.NewRequest(&eventsv2.WatchActionEventsRequest{Run: "r"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	received := make(chan bool, 1)
	go func() { received <- stream.Receive() }()
	time.Sleep(100 * time.Millisecond) // let the stream reach its wait
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop with an open watch")
	}
	if <-received {
		t.Fatal("unexpected message")
	}
	if connect.CodeOf(stream.Err()) != connect.CodeUnavailable && !errors.Is(stream.Err(), io.EOF) {
		t.Logf("watch ended with %v", stream.Err())
	}
}

func TestHarnessOutage(t *testing.T) {
	inst := eventsvctest.Start(t, eventsvctest.Options{})
	c := newClients(inst.URL, nil)
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, ""))
	inst.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Record(ctx, connect.NewRequest(&workflow.RecordRequest{Events: []*workflow.ActionEvent{ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")}}))
	if err == nil || !events.Retryable(err) {
		t.Fatalf("during outage: want a retryable error, got %v", err)
	}
	inst.Resume()
	record(t, c, ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, ""))
	if stored, _ := inst.Store.Counts(); stored != 2 {
		t.Fatalf("stored %d, want 2", stored)
	}
}

// TestRecordRoundTrip sends a full Flyte ActionEvent, built from the
// flyteidl2 protos, through EventsProxyService/Record and reads it back
// unchanged through the read side, over each protocol.
func TestRecordRoundTrip(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	h2c := &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	for name, c := range map[string]clients{
		"connect": newClients(srv.URL(), nil),
		"grpc":    newClients(srv.URL(), h2c, connect.WithGRPC()),
	} {
		t.Run(name, func(t *testing.T) {
			e := ev("rt-"+name, "a0", 2, common.ActionPhase_ACTION_PHASE_FAILED, 3, "pod-1")
			e.ReportedTime = timestamppb.New(time.Unix(1700000001, 5))
			e.Cluster = "c1"
			e.Outputs = &task.OutputReferences{OutputUri: "s3://b/o/outputs.pb", ReportUri: "s3://b/o/report.html"}
			e.LogInfo = []*core.TaskLog{{Name: "Kubernetes Logs", Uri: "http://k8s/log", MessageFormat: core.TaskLog_JSON, Ready: true}}
			e.LogContext = &core.LogContext{PrimaryPodName: "pod-1", Pods: []*core.PodLogContext{{Namespace: "ns", PodName: "pod-1",
				PrimaryContainerName: "main", Containers: []*core.ContainerContext{{ContainerName: "main"}}}}}
			e.CacheStatus = core.CatalogCacheStatus_CACHE_POPULATED
			e.ClusterEvents = []*workflow.ClusterEvent{{OccurredAt: timestamppb.New(time.Unix(1700000000, 0)), Message: "Back-off",
				Type: workflow.ClusterEvent_TYPE_WARNING, Reason: "BackOff", SourceComponent: "kubelet", Count: 3}}
			e.CacheMetadata = &common.CacheMetadata{SourceActionAttempt: &common.ActionAttemptIdentifier{ActionId: e.GetId(), Attempt: 1}}
			record(t, c, e)
			resp, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{
				Org: "o", Project: "p", Domain: "d", Run: "rt-" + name}))
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Msg.GetEvents(); len(got) != 1 || !proto.Equal(got[0], e) {
				t.Fatalf("read back %v\nwant %v", got, e)
			}
			other, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{
				Org: "another", Run: "rt-" + name}))
			if err != nil || len(other.Msg.GetEvents()) != 0 {
				t.Fatalf("org filter: %v %v", other, err)
			}
		})
	}
}

// TestRecordMetrics: the service counts its Record calls by code and their
// events by result at GET /metrics.
func TestRecordMetrics(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	c := newClients(srv.URL(), nil)
	a := ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	b := ev("r", "b", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	record(t, c, a, b)
	record(t, c, a, b) // resent: both duplicates
	bad := ev("r", "c", 0, common.ActionPhase_ACTION_PHASE_RUNNING, 0, "")
	if _, err := c.Record(context.Background(), connect.NewRequest(&workflow.RecordRequest{Events: []*workflow.ActionEvent{bad, a}})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("invalid batch: %v, want InvalidArgument", err)
	}
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`events_service_record_calls_total{code="ok"} 2`,
		`events_service_record_calls_total{code="invalid_argument"} 1`,
		`events_service_events_total{result="stored"} 2`,
		`events_service_events_total{result="duplicate"} 2`,
		`events_service_events_total{result="refused"} 2`,
		`events_service_events_total{result="failed"} 0`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// encodingRecorder notes the Content-Encoding of each response it carries.
type encodingRecorder struct {
	base http.RoundTripper
	got  []string
}

func (r *encodingRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil {
		r.got = append(r.got, resp.Header.Get("Content-Encoding"))
	}
	return resp, err
}

// A Record's acknowledgement is a few bytes: gzip would cost the service
// more CPU than it saves, so it goes out as it is; a page of events is
// compressed for a client that accepts gzip.
func TestOnlyLargeResponsesCompressed(t *testing.T) {
	srv := startServer(t, sqliteStore(t))
	rec := &encodingRecorder{base: http.DefaultTransport}
	c := newClients(srv.URL(), &http.Client{Transport: rec})
	evs := make([]*workflow.ActionEvent, 0, 50)
	for i := range 50 {
		evs = append(evs, ev("compress", fmt.Sprintf("a%d", i), 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "a message long enough to add up"))
	}
	record(t, c, evs...)
	resp, err := c.ListActionEvents(context.Background(), connect.NewRequest(&eventsv2.ListActionEventsRequest{Run: "compress"}))
	if err != nil || len(resp.Msg.GetEvents()) != len(evs) {
		t.Fatalf("list: %d events, %v", len(resp.Msg.GetEvents()), err)
	}
	if want := []string{"", "gzip"}; !slices.Equal(rec.got, want) {
		t.Fatalf("response encodings (Record, List) = %q, want %q", rec.got, want)
	}
}
