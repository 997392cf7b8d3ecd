package svcbase_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskaction/executor/internal/svcbase"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerServesHealthAndStopsOnCancel(t *testing.T) {
	var storeErr error
	ended := make(chan struct{})
	srv := svcbase.New(svcbase.Options{
		Name: "test service", Listen: "127.0.0.1:0",
		Ping: func(context.Context) error { return storeErr },
		Mount: func(mux *http.ServeMux) {
			mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hi")) })
		},
		BeforeShutdown: func() { close(ended) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	if code, body := get(t, srv.URL()+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz = %d %q", code, body)
	}
	if code, body := get(t, srv.URL()+"/hello"); code != 200 || body != "hi" {
		t.Fatalf("mounted handler = %d %q", code, body)
	}
	storeErr = errors.New("disk gone")
	if code, body := get(t, srv.URL()+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "disk gone") {
		t.Fatalf("readyz with a failing store = %d %q", code, body)
	}
	cancel()
	if err := srv.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("BeforeShutdown did not run")
	}
	if _, err := http.Get(srv.URL() + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

func TestListenErrorNamesTheService(t *testing.T) {
	srv := svcbase.New(svcbase.Options{Name: "test service", Listen: "256.0.0.1:1"})
	err := srv.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "test service: listen on 256.0.0.1:1") {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitWithoutStart(t *testing.T) {
	if err := svcbase.New(svcbase.Options{Name: "x"}).Wait(); err == nil {
		t.Fatal("Wait without Start succeeded")
	}
}
