package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

const flagPrefix = Section + "."

// BindFlags registers one --executor.<key> flag per configuration key on fs,
// writing into c. Flag defaults are the values c holds when called.
func BindFlags(fs *pflag.FlagSet, c *Config) {
	s := func(p *string, key, usage string) { fs.StringVar(p, flagPrefix+key, *p, usage) }
	b := func(p *bool, key, usage string) { fs.BoolVar(p, flagPrefix+key, *p, usage) }
	i := func(p *int, key, usage string) { fs.IntVar(p, flagPrefix+key, *p, usage) }
	d := func(p *Duration, key, usage string) { fs.DurationVar(&p.Duration, flagPrefix+key, p.Duration, usage) }

	s(&c.MetricsBindAddress, "metricsBindAddress", "address of the metrics server (\"0\" disables it)")
	s(&c.HealthProbeBindAddress, "healthProbeBindAddress", "address of /healthz and /readyz (\"0\" disables them)")
	b(&c.LeaderElect, "leaderElect", "elect a leader so that only one replica reconciles")
	s(&c.LeaderElectionNamespace, "leaderElectionNamespace", "namespace of the leader-election Lease outside a cluster (else POD_NAMESPACE, else default)")
	b(&c.MetricsSecure, "metricsSecure", "serve metrics over HTTPS with authentication and authorization")
	s(&c.MetricsCertPath, "metricsCertPath", "directory of the metrics server's certificate (empty: self-signed)")
	s(&c.MetricsCertName, "metricsCertName", "certificate file name in metricsCertPath")
	s(&c.MetricsCertKey, "metricsCertKey", "key file name in metricsCertPath")
	i(&c.WebhookPort, "webhookPort", "port of the webhook server")
	s(&c.WebhookCertPath, "webhookCertPath", "directory of the webhook server's certificate")
	s(&c.WebhookCertName, "webhookCertName", "certificate file name in webhookCertPath")
	s(&c.WebhookCertKey, "webhookCertKey", "key file name in webhookCertPath")
	b(&c.EnableHTTP2, "enableHTTP2", "allow HTTP/2 on the metrics and webhook servers")
	s(&c.EventsServiceURL, "eventsServiceURL", "base URL of the events service")
	s(&c.CacheServiceURL, "cacheServiceURL", "base URL of the cache service")
	s(&c.Cluster, "cluster", "cluster name reported in events")
	s(&c.DefaultK8sServiceAccount, "defaultK8sServiceAccount", "service account for task pods whose template names none")
	s(&c.DefaultCPU, "defaultCPU", "CPU request and limit of a task container that sets neither")
	s(&c.DefaultMemory, "defaultMemory", "memory request and limit of a task container that sets neither")
	d(&c.ImagePullGracePeriod, "imagePullGracePeriod", "how long an image pull may back off before the attempt fails")
	d(&c.CreateContainerGracePeriod, "createContainerGracePeriod", "how long CreateContainerError may last before the attempt fails")
	i(&c.MaxSystemFailures, "maxSystemFailures", "consecutive system failures tolerated before a TaskAction fails")
	i(&c.MaxConcurrentReconciles, "maxConcurrentReconciles", "reconcile workers")
	d(&c.RequeueDuration, "requeueDuration", "base delay of timed requeues (backoff, reservations)")
	fs.Float32Var(&c.KubeAPIQPS, flagPrefix+"kubeAPIQPS", c.KubeAPIQPS, "client-side QPS limit towards the API server")
	i(&c.KubeAPIBurst, "kubeAPIBurst", "client-side burst towards the API server")
	d(&c.GC.Interval, "gc.interval", "interval between garbage-collection sweeps (0 disables the collector)")
	d(&c.GC.MaxTTL, "gc.maxTTL", "how long a terminal TaskAction is kept")
	bindWebhookFlags(fs, &c.Webhook)
}

// Load builds the effective configuration: defaults, then the YAML file at path
// (if not empty), then every --executor.* flag that was set on flags. It validates
// the result and touches nothing but the file.
func Load(path string, flags *pflag.FlagSet) (Config, error) {
	c := Default()
	if path != "" {
		if err := loadFile(path, &c); err != nil {
			return Config{}, err
		}
	}
	if flags != nil {
		bound := pflag.NewFlagSet("bound", pflag.ContinueOnError)
		BindFlags(bound, &c)
		var ferr error
		flags.Visit(func(f *pflag.Flag) {
			if ferr == nil && strings.HasPrefix(f.Name, flagPrefix) {
				if err := bound.Set(f.Name, f.Value.String()); err != nil {
					ferr = fmt.Errorf("--%s: %w", f.Name, err)
				}
			}
		})
		if ferr != nil {
			return Config{}, ferr
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func loadFile(path string, c *Config) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("config file %s: not valid YAML: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return fmt.Errorf("config file %s: the top level must be a mapping with a section %q", path, Section)
	}
	for k := range top {
		if k != Section {
			return fmt.Errorf("config file %s: unknown section %q (expected %q)", path, k, Section)
		}
	}
	sec, ok := top[Section]
	if !ok || string(sec) == "null" {
		return nil
	}
	return decodeSection("", reflect.ValueOf(c).Elem(), sec, path)
}

// decodeSection decodes a mapping into the struct v key by key, so that every
// error names the key it is about (encoding/json alone does not for durations).
func decodeSection(prefix string, v reflect.Value, raw json.RawMessage, path string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("config file %s: %s must be a mapping", path, strings.TrimSuffix(Section+"."+prefix, "."))
	}
	fields := map[string]reflect.Value{}
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		fields[name] = v.Field(i)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := fields[k]
		if !ok {
			return fmt.Errorf("config file %s: unknown key %q", path, prefix+k)
		}
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(Duration{}) {
			if err := decodeSection(prefix+k+".", f, m[k], path); err != nil {
				return err
			}
			continue
		}
		if err := json.Unmarshal(m[k], f.Addr().Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return fmt.Errorf("config file %s: %s must be a %s, got a %s", path, prefix+k, f.Type(), te.Value)
			}
			return fmt.Errorf("config file %s: %s: %v", path, prefix+k, err)
		}
	}
	return nil
}

// YAML renders c as a config file with the `executor:` section.
func (c Config) YAML() ([]byte, error) {
	return yaml.Marshal(map[string]Config{Section: c})
}

// String keeps durations readable in logs.
func (d Duration) String() string { return time.Duration(d.Duration).String() }
