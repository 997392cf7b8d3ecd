package local

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// localAddr is the loopback listen address of a service URL, and whether
// the URL is on this machine at all.
func localAddr(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, err
	}
	host, port := u.Hostname(), u.Port()
	if host != "localhost" && host != loopbackIP && host != "::1" {
		return "", false, nil
	}
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(loopbackIP, port), true, nil
}

// loopback binds an address without a host to 127.0.0.1; "0" (disabled) stays.
func loopback(addr string) string {
	if addr == "" || addr == "0" {
		return addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort(loopbackIP, port)
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 64 {
		if _, err := os.Stat(filepath.Join(dir, "config", "crd", "bases")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("executor local runs from the executor's repository (it needs bin/k8s and config/): no go.mod with config/crd/bases found here or above")
}

func checkBinaries(root string) (string, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		st, err := os.Stat(filepath.Join(assets, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s not found in %s: run `make envtest`", b, assets)
		}
	}
	return assets, nil
}

func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data directory %s cannot be created: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// checkPorts says which port is taken, rather than letting one component
// fail halfway through the start.
func checkPorts(ss []Service) error {
	for _, s := range ss {
		if s.Addr == "" || s.Addr == "0" {
			continue
		}
		_, port, _ := net.SplitHostPort(s.Addr)
		if port == "0" {
			continue
		}
		ln, err := net.Listen("tcp", s.Addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("port %s (%s) is already in use", port, s.Name)
		}
		if err != nil {
			return fmt.Errorf("cannot listen on %s (%s): %w", s.Addr, s.Name, err)
		}
		_ = ln.Close()
	}
	return nil
}

func waitListening(ctx context.Context, s Service) error {
	if _, port, err := net.SplitHostPort(s.Addr); err != nil || port == "0" {
		return nil // disabled, or a port only the server knows
	}
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", s.Addr)
		if err == nil && s.TLS {
			// Only liveness is checked here; nothing is sent over the connection.
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec
			err = tc.HandshakeContext(ctx)
			c = tc
		}
		if err == nil {
			_ = c.Close()
			return nil
		}
		if c != nil {
			_ = c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not listening on %s: %w", s.Name, s.Addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
