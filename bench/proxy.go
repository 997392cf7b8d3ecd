package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
	"github.com/taskaction/executor/internal/kwokrig"
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
			if evs, err := kwokrig.DecodeRecord(r.Header, body); err == nil {
				p.events.Add(int64(len(evs)))
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

func (p *eventsProxy) close() { _ = p.srv.Close() }
