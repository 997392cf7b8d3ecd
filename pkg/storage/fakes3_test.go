package storage_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/config"
)

// fakeS3 is an S3-compatible service (path-style) that answers every GET and
// HEAD of any bucket with the object's name as its content, and remembers
// which buckets were asked for and the requests' headers. It isolates the
// test from the machine's AWS configuration (isolateAWS).
type fakeS3 struct {
	*httptest.Server

	mu      sync.Mutex
	buckets map[string]int
	headers []http.Header
}

func (f *fakeS3) handle(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	f.mu.Lock()
	f.buckets[bucket]++
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	body := bucket + "/" + key
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"e"`)
	w.Header().Set("Last-Modified", time.Unix(1700000000, 0).UTC().Format(http.TimeFormat))
	switch r.Method {
	case http.MethodHead:
	case http.MethodGet:
		_, _ = w.Write([]byte(body))
	default:
		http.Error(w, "<Error><Code>NotImplemented</Code></Error>", http.StatusNotImplemented)
	}
}

func newFakeS3(t *testing.T, withTLS bool) *fakeS3 {
	t.Helper()
	isolateAWS(t)
	f := &fakeS3{buckets: map[string]int{}}
	if withTLS {
		f.Server = httptest.NewTLSServer(http.HandlerFunc(f.handle))
	} else {
		f.Server = httptest.NewServer(http.HandlerFunc(f.handle))
	}
	t.Cleanup(f.Close)
	return f
}

// askedFor says how many requests named bucket.
func (f *fakeS3) askedFor(bucket string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buckets[bucket]
}

// config is a storage section that reaches the fake with access keys, its
// metadata bucket being container.
func (f *fakeS3) config(container string) config.StorageConfig {
	return config.StorageConfig{Type: config.StorageTypeStow, Container: container,
		Stow: config.StowConfig{Kind: config.StowKindS3, Config: map[string]string{
			"endpoint": f.URL, "auth_type": "accesskey", "access_key_id": "id", "secret_key": "secret", "region": "us-east-1"}}}
}
