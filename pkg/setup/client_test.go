package setup

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/taskaction/executor/pkg/config"
)

// TestClientConfigCompression: the executor's API client asks for gzip only
// when kubeAPICompression is on (the header is what the API server decides
// by, watch streams included).
func TestClientConfigCompression(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Accept-Encoding")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		compression bool
		want        string
	}{{false, ""}, {true, "gzip"}} {
		cfg := config.Default()
		cfg.KubeAPICompression = tc.compression
		// TLS, as every API server serves: client-go gives a plain-HTTP
		// config without one Go's default transport, which always asks.
		rc := clientConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, cfg)
		if rc.QPS != cfg.KubeAPIQPS || rc.Burst != cfg.KubeAPIBurst {
			t.Errorf("limits %v/%d, want %v/%d", rc.QPS, rc.Burst, cfg.KubeAPIQPS, cfg.KubeAPIBurst)
		}
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := <-got; h != tc.want {
			t.Errorf("kubeAPICompression=%v: Accept-Encoding %q, want %q", tc.compression, h, tc.want)
		}
	}
}
