package local

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestLogServerListensOnLoopbackOnly(t *testing.T) {
	cases := []struct {
		addr string
		want string // error; empty: accepted
	}{
		{"127.0.0.1:0", ""},
		{"127.0.0.5:0", ""},
		{"[::1]:0", ""},
		{"localhost:0", ""},
		{":0", `local node: log server: ":0" is not a loopback address: the log endpoint does not authenticate, so it listens on loopback only`},
		{"0.0.0.0:10250", `local node: log server: "0.0.0.0:10250" is not a loopback address: the log endpoint does not authenticate, so it listens on loopback only`},
		{"192.0.2.1:10250", `local node: log server: "192.0.2.1:10250" is not a loopback address: the log endpoint does not authenticate, so it listens on loopback only`},
		{"node.invalid:10250", `local node: log server: "node.invalid:10250" is not a loopback address: the log endpoint does not authenticate, so it listens on loopback only`},
		{"10250", `local node: log server: "10250" is not host:port`},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			n := &Node{LogsAddr: tc.addr}
			ln, _, err := n.logServer()
			if ln != nil {
				_ = ln.Close()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.addr == "[::1]:0" && err != nil {
				t.Skipf("no IPv6 loopback here: %v", err)
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A request names a namespace, pod and container; those become a file path,
// so a name that is not a Kubernetes name must not read outside the pods.
func TestServeLogsReadsOnlyPodLogs(t *testing.T) {
	dir := t.TempDir()
	n := &Node{DataDir: dir, Name: "local"}
	if err := os.WriteFile(filepath.Join(dir, "secret.log"), []byte("not a pod's log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := n.LogPath("team-a", "hello-1", "main")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte("line 1\nline 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", n.serveLogs)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cases := []struct {
		path string
		code int
		body string
	}{
		{"/containerLogs/team-a/hello-1/main", http.StatusOK, "line 1\nline 2\n"},
		{"/containerLogs/team-a/hello-1/main?tailLines=1", http.StatusOK, "line 2\n"},
		{"/containerLogs/x/x/..%2F..%2Fsecret", http.StatusBadRequest, "namespace, pod or container is not a Kubernetes name\n"},
		{"/containerLogs/..%2F..%2F..%2Ftmp/x/main", http.StatusBadRequest, "namespace, pod or container is not a Kubernetes name\n"},
		{"/containerLogs/team-a/Hello_1/main", http.StatusBadRequest, "namespace, pod or container is not a Kubernetes name\n"},
		{"/containerLogs/team-a/other-1/main", http.StatusNotFound, "no log for container \"main\" of pod team-a/other-1 on node local yet\n"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || string(b) != tc.body {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}
}
