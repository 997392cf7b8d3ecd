package local

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// logServer serves the kubelet's containerLogs endpoint on a loopback port,
// so that `kubectl logs` works: the API server proxies it to the Node's
// InternalIP and kubelet port. Without --kubelet-certificate-authority the API
// server does not verify the serving certificate, so a self-signed one does.
//
// The endpoint does not authenticate (the API server presents no client
// certificate to it), so it listens on loopback only: any process of this
// machine may read the local pods' logs, nothing from another machine may.
func (n *Node) logServer() (net.Listener, *http.Server, error) {
	if err := requireLoopback(n.LogsAddr); err != nil {
		return nil, nil, fmt.Errorf("local node: log server: %w", err)
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, nil, fmt.Errorf("local node: log server certificate: %w", err)
	}
	ln, err := net.Listen("tcp", n.LogsAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("local node: log server: listen on %s: %w", n.LogsAddr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("local node: log server: %s resolved to %s, not a loopback address", n.LogsAddr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", n.serveLogs)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	return ln, srv, nil
}

func (n *Node) serveLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	// The names become a file path: only what Kubernetes accepts as names, so
	// that no request reads outside the pods' directory ("..%2F..").
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(pod)) > 0 || len(validation.IsDNS1123Label(container)) > 0 {
		http.Error(w, "namespace, pod or container is not a Kubernetes name", http.StatusBadRequest)
		return
	}
	path := n.LogPath(ns, pod, container)
	q := r.URL.Query()
	b, err := os.ReadFile(path)
	if err != nil {
		http.Error(w, fmt.Sprintf("no log for container %q of pod %s/%s on node %s yet", container, ns, pod, n.Name), http.StatusNotFound)
		return
	}
	if s := q.Get("tailLines"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v >= 0 {
			b = lastLines(b, v)
		}
	}
	if s := q.Get("limitBytes"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v >= 0 && v < len(b) {
			b = b[:v]
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	if _, err := w.Write(b); err != nil || q.Get("follow") != "true" {
		return
	}
	n.follow(w, r, ns, pod, path, int64(len(b)))
}

// follow streams what is appended to path until the pod's processes ended
// or the client went away.
func (n *Node) follow(w http.ResponseWriter, r *http.Request, ns, pod, path string, off int64) {
	fl, _ := w.(http.Flusher)
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := io.Copy(w, f); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		n.mu.Lock()
		run := n.runs[ns+"/"+pod]
		n.mu.Unlock()
		if run == nil || run.finished() {
			_, _ = io.Copy(w, f)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// requireLoopback refuses a listen address that is not on loopback: a literal
// loopback IP or "localhost". An empty host would listen on every interface.
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address: the log endpoint does not authenticate, so it listens on loopback only", addr)
}

// lastLines is the last n lines of b.
func lastLines(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i, seen := end-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if seen++; seen == n {
				return b[i+1:]
			}
		}
	}
	return b
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "executor-local-node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(loopbackIP)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
