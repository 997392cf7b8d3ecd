package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
)

// eventsProxy sits in front of the events service and counts Record calls
// and the events they carry (decoding each request body, Connect unary:
// proto or JSON, maybe gzip).
type eventsProxy struct {
	srv          *http.Server
	addr         string
	records      atomic.Int64
	events       atomic.Int64
	undecoded    atomic.Int64
	recordFailed atomic.Int64
}

func startEventsProxy(target string) (*eventsProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &eventsProxy{addr: l.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path == workflowconnect.EventsProxyServiceRecordProcedure && resp.StatusCode != http.StatusOK {
			p.recordFailed.Add(1)
		}
		return nil
	}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == workflowconnect.EventsProxyServiceRecordProcedure {
			body, err := io.ReadAll(r.Body)
			_ = r.Body.Close()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			p.records.Add(1)
			if n, ok := countEvents(r.Header, body); ok {
				p.events.Add(int64(n))
			} else {
				p.undecoded.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func countEvents(h http.Header, body []byte) (int, bool) {
	if h.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0, false
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return 0, false
		}
		body = b
	}
	var req workflow.RecordRequest
	ct := h.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/proto"):
		if err := proto.Unmarshal(body, &req); err != nil {
			return 0, false
		}
	case strings.HasPrefix(ct, "application/json"):
		if err := protojson.Unmarshal(body, &req); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return len(req.GetEvents()), true
}

func (p *eventsProxy) close() { _ = p.srv.Close() }
