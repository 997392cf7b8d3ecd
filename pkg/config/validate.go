package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds of the numeric keys. Each is documented in the README's key table.
const (
	// MinRequeueDuration keeps timed requeues from becoming a hot loop.
	MinRequeueDuration = time.Second
	// ReservationLapse is the shortest time a cache reservation outlives its
	// last renewal at the services the executor talks to: a service grants 3
	// heartbeats, the heartbeat being the one asked for (requeueDuration)
	// capped at the service's maximum, 10s for Flyte's cache service by default
	// (1m for ours, cachesvc.MaxHeartbeat).
	ReservationLapse = 3 * 10 * time.Second
	// MaxRequeueDuration: the holder of a reservation renews it once per
	// requeueDuration, so requeueDuration must stay below ReservationLapse
	// with room for a busy work queue; half of it leaves 15s.
	MaxRequeueDuration = ReservationLapse / 2
	// DefaultQueuedStatusDelay: a task whose pod starts and ends within it
	// costs one status write. While held, the launch is remembered in
	// memory, so a pod deleted by someone else meanwhile is still counted
	// (only a restart within the delay forgets it).
	DefaultQueuedStatusDelay = 5 * time.Second
	// MaxQueuedStatusDelay bounds how long the status may say nothing of a
	// created pod.
	MaxQueuedStatusDelay = time.Minute
	// DefaultSaturatedStatusDelay: measured at N=10,000 and QPS 1000 on the
	// bench rig, where pods wait minutes for the overloaded kwok: with a
	// one-minute hold most TaskActions still cost three status patches, with
	// five minutes two writes in all (docs/benchmark.md).
	DefaultSaturatedStatusDelay = 5 * time.Minute
	// MaxSaturatedStatusDelay bounds how long Flyte's API (which reads the
	// phase from the TaskAction's conditions) may show a running action as
	// queued under load.
	MaxSaturatedStatusDelay = 30 * time.Minute
	// DefaultExecutingStatusDelay: under saturation, a task that ends within
	// it costs no Executing write; a longer one shows as running in Flyte's
	// UI at most this late. Measured (docs/benchmark.md, session 14): on the
	// bench's saturated rig a "2 s" pod runs 10–30 s (kwok's backlog), so at
	// 10s nearly every TaskAction paid the write (3.00 requests each, 0.62×
	// the floor), at 30s none (2.00, 0.70×, as before the write existed).
	// Session 17: the executor now launches every pod of a burst within
	// seconds, kwok's backlog runs them 30–100 s, and at 30s 45–70% paid
	// the write again, at 1m 60–74% (2.45–2.74 requests at N=10,000, where
	// the client's QPS bounds throughput). Now the same as Queued's hold under
	// saturation (DefaultSaturatedStatusDelay, measured the same way): a
	// status that only reports progress waits while launches and
	// completions need the writes. The RUNNING event is sent at once.
	DefaultExecutingStatusDelay = DefaultSaturatedStatusDelay
	// MaxExecutingStatusDelay bounds how late, under load, Flyte's API may
	// show a running action as running (as MaxSaturatedStatusDelay a
	// queued one).
	MaxExecutingStatusDelay = MaxSaturatedStatusDelay
	// MinGCInterval keeps the collector's sweeps (a walk of every terminal
	// TaskAction in the cache) from becoming a hot loop.
	MinGCInterval = time.Minute
	// MaxSystemFailuresLimit bounds the relaunches of one attempt (the
	// controller stores the count as int32).
	MaxSystemFailuresLimit = 100
	// MaxConcurrentReconcilesLimit bounds the worker goroutines; more only
	// wait on the client's QPS limit and cost memory.
	MaxConcurrentReconcilesLimit = 1024
)

// Problem is one invalid key.
type Problem struct {
	Key     string // dotted, as in the file: "gc.maxTTL"
	Message string
	// Sentence: the line is the key then the message, without the colon,
	// for messages documented (and grepped for) in that form.
	Sentence bool
}

func (p Problem) String() string {
	if p.Sentence {
		return p.Key + " " + p.Message
	}
	return p.Key + ": " + p.Message
}

// ValidationError lists every invalid key, one per line.
type ValidationError struct{ Problems []Problem }

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].String()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  " + p.String()
	}
	return fmt.Sprintf("%d problems:\n%s", len(e.Problems), strings.Join(lines, "\n"))
}

// Validate is the one check of a configuration, run by `executor config` and
// by every command that starts something, before anything starts. It reports
// every invalid key (a *ValidationError), or nil. It reads the certificate
// files the servers would load; it contacts nothing.
func (c Config) Validate() error {
	var ps []Problem
	add := func(key, format string, a ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, a...)})
	}

	binds := map[string]bindAddr{}
	for _, kv := range [][2]string{
		{"metricsBindAddress", c.MetricsBindAddress},
		{"healthProbeBindAddress", c.HealthProbeBindAddress},
		{"pprofBindAddress", c.PprofBindAddress},
	} {
		b, err := parseBindAddress(kv[1])
		if err != nil {
			add(kv[0], "%v", err)
			continue
		}
		binds[kv[0]] = b
	}
	if c.WebhookPort < 1 || c.WebhookPort > 65535 {
		add("webhookPort", "must be between 1 and 65535, got %d", c.WebhookPort)
	} else if c.Webhook.Active() {
		// The webhook server listens only when the webhooks are served.
		binds["webhookPort"] = bindAddr{host: c.Webhook.Host, port: c.WebhookPort, on: true}
	}
	for _, pair := range [][2]string{
		{"metricsBindAddress", "healthProbeBindAddress"},
		{"metricsBindAddress", "webhookPort"},
		{"healthProbeBindAddress", "webhookPort"},
		{"metricsBindAddress", "pprofBindAddress"},
		{"healthProbeBindAddress", "pprofBindAddress"},
		{"pprofBindAddress", "webhookPort"},
	} {
		a, aok := binds[pair[0]]
		b, bok := binds[pair[1]]
		if aok && bok && a.overlaps(b) {
			add(pair[1], "port %d is also %s's; the servers need different ports", b.port, pair[0])
		}
	}
	if ns := c.LeaderElectionNamespace; ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			add("leaderElectionNamespace", "%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	for _, kv := range [][2]string{
		{"eventsServiceURL", c.EventsServiceURL},
		{"cacheServiceURL", c.CacheServiceURL},
	} {
		if err := ValidateServiceURL(kv[1]); err != nil {
			add(kv[0], "%v", err)
		}
	}
	if err := validateCertDir(c.MetricsCertPath, c.MetricsCertName, c.MetricsCertKey); err != nil {
		add("metricsCertPath", "%v", err)
	}
	if err := validateCertDir(c.WebhookCertPath, c.WebhookCertName, c.WebhookCertKey); err != nil {
		add("webhookCertPath", "%v", err)
	}
	seen := map[string]bool{}
	for _, ns := range c.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			add("namespaces", "%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		} else if seen[ns] {
			add("namespaces", "%q is listed twice", ns)
		}
		seen[ns] = true
	}
	if sa := c.DefaultK8sServiceAccount; sa != "" {
		if errs := validation.IsDNS1123Subdomain(sa); len(errs) > 0 {
			add("defaultK8sServiceAccount", "%q is not a service account name: %s", sa, strings.Join(errs, "; "))
		}
	}
	for _, kv := range [][2]string{{"defaultCPU", c.DefaultCPU}, {"defaultMemory", c.DefaultMemory}} {
		if err := validateDefaultQuantity(kv[1]); err != nil {
			add(kv[0], "%v", err)
		}
	}
	for _, kv := range []struct {
		key string
		d   Duration
	}{{"imagePullGracePeriod", c.ImagePullGracePeriod}, {"createContainerGracePeriod", c.CreateContainerGracePeriod}} {
		if kv.d.Duration <= 0 {
			add(kv.key, "must be positive, got %v (there is no \"no grace\" value: use a short period such as 1s)", kv.d)
		}
	}
	if d := c.QueuedStatusDelay.Duration; d < 0 || d > MaxQueuedStatusDelay {
		add("queuedStatusDelay", "must be between 0 (write Queued at once) and %v, got %v", MaxQueuedStatusDelay, c.QueuedStatusDelay)
	}
	if d := c.SaturatedStatusDelay.Duration; d < 0 || d > MaxSaturatedStatusDelay {
		add("saturatedStatusDelay", "must be between 0 (no longer than queuedStatusDelay) and %v, got %v", MaxSaturatedStatusDelay, c.SaturatedStatusDelay)
	}
	if d := c.ExecutingStatusDelay.Duration; d < 0 || d > MaxExecutingStatusDelay {
		add("executingStatusDelay", "must be between 0 (write Executing at once) and %v, got %v", MaxExecutingStatusDelay, c.ExecutingStatusDelay)
	}
	if n := c.MaxSystemFailures; n < 0 || n > MaxSystemFailuresLimit {
		add("maxSystemFailures", "must be between 0 and %d, got %d", MaxSystemFailuresLimit, n)
	}
	if n := c.MaxConcurrentReconciles; n < 1 || n > MaxConcurrentReconcilesLimit {
		add("maxConcurrentReconciles", "must be between 1 and %d, got %d", MaxConcurrentReconcilesLimit, n)
	}
	switch d := c.RequeueDuration.Duration; {
	case d < MinRequeueDuration:
		add("requeueDuration", "must be at least %v (shorter requeues make a hot loop), got %v", MinRequeueDuration, c.RequeueDuration)
	case d > MaxRequeueDuration:
		add("requeueDuration", "must be at most %v, got %v: it is also the cache reservation heartbeat, and a reservation lapses %v after its last renewal",
			MaxRequeueDuration, c.RequeueDuration, ReservationLapse)
	}
	if q := float64(c.KubeAPIQPS); math.IsNaN(q) || math.IsInf(q, 0) || q <= 0 {
		add("kubeAPIQPS", "must be a positive finite number, got %v", c.KubeAPIQPS)
	}
	if c.KubeAPIBurst < 1 {
		add("kubeAPIBurst", "must be at least 1, got %d", c.KubeAPIBurst)
	}
	if d := c.GC.Interval.Duration; d < 0 || (d > 0 && d < MinGCInterval) {
		add("gc.interval", "must be 0 (gc disabled) or at least %v (each sweep lists every TaskAction), got %v", MinGCInterval, c.GC.Interval)
	} else if c.GC.Interval.Duration > 0 && c.GC.MaxTTL.Duration <= 0 {
		// The documented line, word for word (pkg/gc refuses with the same).
		ps = append(ps, Problem{Key: "gc.maxTTL", Message: "must be positive when gc is enabled", Sentence: true})
	}
	ps = append(ps, c.Webhook.validate()...)
	ps = append(ps, c.PodSecurity.validate()...)
	for _, err := range []error{c.Storage.Validate(), c.TaskLogs.Validate(), c.K8sPlugin.Validate(), c.Otel.Validate()} {
		if err == nil {
			continue
		}
		// Each line of these names its own dotted key first: "storage.type \"x\": want ...".
		for _, line := range strings.Split(err.Error(), "\n") {
			key, msg, _ := strings.Cut(line, " ")
			add(key, "%s", msg)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// bindAddr is a parsed listen address; on is false for "0" (disabled).
type bindAddr struct {
	host string
	port int
	on   bool
}

func parseBindAddress(addr string) (bindAddr, error) {
	if addr == "0" {
		return bindAddr{}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bindAddr{}, fmt.Errorf("%q is not host:port (or \"0\" to disable)", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return bindAddr{}, fmt.Errorf("%q has an invalid port", addr)
	}
	return bindAddr{host: host, port: p, on: true}, nil
}

// overlaps tells whether two listeners would fight over one port: the same
// fixed port on the same host, or on any host when either takes every interface.
func (a bindAddr) overlaps(b bindAddr) bool {
	if !a.on || !b.on || a.port == 0 || a.port != b.port {
		return false
	}
	return a.host == b.host || wildcardHost(a.host) || wildcardHost(b.host)
}

func wildcardHost(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }

// ValidateServiceURL checks a base URL of the events or cache service: http or
// https, with a host, and nothing the clients would append paths after.
func ValidateServiceURL(raw string) error {
	if !strings.Contains(raw, "://") {
		return fmt.Errorf("%q has no scheme: write it as \"http://%s\" (or https)", raw, strings.TrimPrefix(raw, "//"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: the scheme must be http or https, not %q", raw, u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("%q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?"):
		return fmt.Errorf("%q must not have a query or a fragment", raw)
	}
	return nil
}

// validateDefaultQuantity: "" means no default; else a positive quantity.
func validateDefaultQuantity(v string) error {
	if v == "" {
		return nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("%q is not a resource quantity (such as \"500m\" or \"1Gi\"; \"\" for no default)", v)
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("%q is not positive (use a quantity such as \"500m\" or \"1Gi\", or \"\" for no default)", v)
	}
	return nil
}

// validateCertDir loads the pair the server would load at start.
func validateCertDir(dir, certName, keyName string) error {
	if dir == "" {
		return nil
	}
	certFile, keyFile := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	for _, p := range []string{certFile, keyFile} {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s is not readable: %v", p, errors.Unwrap(err))
		}
		if st.IsDir() {
			return fmt.Errorf("%s is a directory, not a PEM file", p)
		}
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return fmt.Errorf("%s and %s are not a PEM certificate and its private key: %v", certFile, keyName, err)
	}
	return nil
}
