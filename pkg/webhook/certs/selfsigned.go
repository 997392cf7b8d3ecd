package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultResync is how often the Secret and the caBundles are checked again:
// a configuration re-applied without its caBundle, a deleted Secret or a
// chain near its end is repaired within it.
const DefaultResync = 5 * time.Minute

// SelfSigned serves a generated chain kept in a Secret and keeps the CA in
// the executor's webhook configurations. It is a manager Runnable that runs
// on every replica (all of them serve webhooks).
type SelfSigned struct {
	// Client must read from the API server, not from an informer cache:
	// a cache would list every Secret of the cluster.
	Client client.Client
	// Secret holds the chain (keys ca.crt, tls.crt, tls.key).
	Secret types.NamespacedName
	// Hosts are the names the serving certificate is valid for.
	Hosts []string
	// MutatingConfig and ValidatingConfig name the configurations whose
	// caBundle is set; empty skips one.
	MutatingConfig, ValidatingConfig string
	// Resync is the period of re-checks; zero means DefaultResync.
	Resync time.Duration
	Log    logr.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time

	cert     atomic.Pointer[tls.Certificate]
	loaded   chan struct{}
	loadOnce sync.Once
	initOnce sync.Once
}

func (s *SelfSigned) init() {
	s.initOnce.Do(func() { s.loaded = make(chan struct{}) })
}

// GetCertificate is the TLS server's certificate callback. Until the chain is
// loaded every handshake fails, which the API server treats as the webhook
// being down (its failurePolicy decides).
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhook serving certificate not loaded yet")
}

// TLSOption installs GetCertificate on a server's TLS configuration.
func (s *SelfSigned) TLSOption(c *tls.Config) { c.GetCertificate = s.GetCertificate }

// Loaded is closed once a chain is being served.
func (s *SelfSigned) Loaded() <-chan struct{} {
	s.init()
	return s.loaded
}

// Checker reports ready once a chain is being served.
func (s *SelfSigned) Checker(*http.Request) error {
	if s.cert.Load() == nil {
		return errors.New("webhook serving certificate not loaded yet")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves webhooks.
func (s *SelfSigned) NeedLeaderElection() bool { return false }

// Start loads the chain from its Secret (creating it if needed), writes the
// CA into the configurations, and repeats both every Resync until ctx ends.
// Failures are logged and retried with backoff; they never stop the manager.
func (s *SelfSigned) Start(ctx context.Context) error {
	s.init()
	resync := s.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	backoff := time.Second
	for {
		wait := resync
		if err := s.syncOnce(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.Log.Error(err, "webhook certificate: will retry", "after", backoff)
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (s *SelfSigned) syncOnce(ctx context.Context) error {
	s.init()
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now()
	b, pair, err := EnsureSecret(ctx, s.Client, s.Secret, s.Hosts, at)
	if err != nil {
		return err
	}
	if old := s.cert.Load(); old == nil || !bytes.Equal(old.Certificate[0], pair.Certificate[0]) {
		s.cert.Store(&pair)
		s.Log.Info("webhook serving certificate loaded", "secret", s.Secret.String(), "notAfter", pair.Leaf.NotAfter)
	}
	s.loadOnce.Do(func() { close(s.loaded) })
	n, err := InjectCABundle(ctx, s.Client, s.MutatingConfig, s.ValidatingConfig, b.CA, at)
	if n > 0 {
		s.Log.Info("webhook CA bundle written", "configurations", n)
	}
	return err
}
