package faults

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
	"github.com/taskaction/executor/internal/kwokrig"
)

// EventsWitness stands between the executor and the events service and keeps
// the events of every Record call the service answered 200: the events the
// executor was told are durable. It can go down (connection refused) and come
// back on the same address.
type EventsWitness struct {
	addr   string
	target *url.URL

	mu        sync.Mutex
	srv       *http.Server
	acked     []*workflow.ActionEvent
	undecoded int
}

type ctxKey struct{}

func StartEventsWitness(target string) (*EventsWitness, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	w := &EventsWitness{target: u}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w.addr = l.Addr().String()
	w.serve(l)
	return w, nil
}

func (w *EventsWitness) URL() string { return "http://" + w.addr }

func (w *EventsWitness) serve(l net.Listener) {
	rp := httputil.NewSingleHostReverseProxy(w.target)
	rp.ModifyResponse = func(resp *http.Response) error {
		evs, _ := resp.Request.Context().Value(ctxKey{}).([]*workflow.ActionEvent)
		if evs != nil && resp.StatusCode == http.StatusOK {
			w.mu.Lock()
			w.acked = append(w.acked, evs...)
			w.mu.Unlock()
		}
		return nil
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == workflowconnect.EventsProxyServiceRecordProcedure {
			body, err := io.ReadAll(r.Body)
			_ = r.Body.Close()
			if err != nil {
				http.Error(rw, err.Error(), http.StatusBadGateway)
				return
			}
			evs, err := kwokrig.DecodeRecord(r.Header, body)
			if err != nil {
				w.mu.Lock()
				w.undecoded++
				w.mu.Unlock()
			}
			r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, evs))
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		rp.ServeHTTP(rw, r)
	})}
	w.mu.Lock()
	w.srv = srv
	w.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// Down closes the listener and every connection: the executor's next call is refused.
func (w *EventsWitness) Down() {
	w.mu.Lock()
	srv := w.srv
	w.srv = nil
	w.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens again on the same address.
func (w *EventsWitness) Up() error {
	var l net.Listener
	var err error
	for range 50 {
		if l, err = net.Listen("tcp", w.addr); err == nil {
			w.serve(l)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Acked returns the acknowledged events so far, and how many Record bodies could not be decoded.
func (w *EventsWitness) Acked() ([]*workflow.ActionEvent, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*workflow.ActionEvent(nil), w.acked...), w.undecoded
}
