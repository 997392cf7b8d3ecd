package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Validate reports every invalid key in one line, or nil.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	for _, kv := range [][2]string{
		{"metricsBindAddress", c.MetricsBindAddress},
		{"healthProbeBindAddress", c.HealthProbeBindAddress},
	} {
		if err := validateBindAddress(kv[1]); err != nil {
			add("%s: %v", kv[0], err)
		}
	}
	if c.WebhookPort < 1 || c.WebhookPort > 65535 {
		add("webhookPort must be between 1 and 65535, got %d", c.WebhookPort)
	}
	for _, kv := range [][2]string{
		{"eventsServiceURL", c.EventsServiceURL},
		{"cacheServiceURL", c.CacheServiceURL},
	} {
		if err := validateServiceURL(kv[1]); err != nil {
			add("%s: %v", kv[0], err)
		}
	}
	if err := validateCertDir("metricsCertPath", c.MetricsCertPath, c.MetricsCertName, c.MetricsCertKey); err != nil {
		errs = append(errs, err)
	}
	if err := validateCertDir("webhookCertPath", c.WebhookCertPath, c.WebhookCertName, c.WebhookCertKey); err != nil {
		errs = append(errs, err)
	}
	for _, kv := range [][2]string{{"defaultCPU", c.DefaultCPU}, {"defaultMemory", c.DefaultMemory}} {
		if _, err := resource.ParseQuantity(kv[1]); err != nil {
			add("%s: %q is not a resource quantity", kv[0], kv[1])
		}
	}
	if c.ImagePullGracePeriod.Duration < 0 {
		add("imagePullGracePeriod must not be negative, got %v", c.ImagePullGracePeriod)
	}
	if c.CreateContainerGracePeriod.Duration < 0 {
		add("createContainerGracePeriod must not be negative, got %v", c.CreateContainerGracePeriod)
	}
	if c.MaxSystemFailures < 0 {
		add("maxSystemFailures must not be negative, got %d", c.MaxSystemFailures)
	}
	if c.MaxConcurrentReconciles < 1 {
		add("maxConcurrentReconciles must be at least 1, got %d", c.MaxConcurrentReconciles)
	}
	if c.RequeueDuration.Duration < 0 {
		add("requeueDuration must not be negative, got %v", c.RequeueDuration)
	} else if c.RequeueDuration.Duration == 0 {
		add("requeueDuration must be positive, got 0s")
	}
	if c.KubeAPIQPS <= 0 {
		add("kubeAPIQPS must be positive, got %v", c.KubeAPIQPS)
	}
	if c.KubeAPIBurst < 1 {
		add("kubeAPIBurst must be at least 1, got %d", c.KubeAPIBurst)
	}
	if c.GC.Interval.Duration < 0 {
		add("gc.interval must not be negative (0 disables gc), got %v", c.GC.Interval)
	} else if c.GC.Interval.Duration > 0 && c.GC.MaxTTL.Duration <= 0 {
		add("gc.maxTTL must be positive when gc is enabled")
	}
	errs = append(errs, c.Webhook.validate()...)
	if len(errs) == 0 {
		return nil
	}
	msg := errs[0].Error()
	for _, e := range errs[1:] {
		msg += "; " + e.Error()
	}
	return errors.New(msg)
}

func validateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (or \"0\" to disable)", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q has an invalid port", addr)
	}
	return nil
}

func validateServiceURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL with a host", raw)
	}
	return nil
}

func validateCertDir(key, dir, certName, keyName string) error {
	if dir == "" {
		return nil
	}
	for _, name := range []string{certName, keyName} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %s is not readable: %v", key, p, errors.Unwrap(err))
		}
	}
	return nil
}
