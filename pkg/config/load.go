package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	yamlv3 "go.yaml.in/yaml/v3"
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
	s(&c.PprofBindAddress, "pprofBindAddress", "address of Go's /debug/pprof profiles, unauthenticated: bind it to localhost (\"0\", the default, disables them)")
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
	fs.Var((*namespaceList)(&c.Namespaces), flagPrefix+"namespaces",
		"namespaces whose TaskActions the executor caches and runs, comma-separated; empty: every namespace")
	s(&c.DefaultK8sServiceAccount, "defaultK8sServiceAccount", "service account for task pods whose template names none")
	s(&c.DefaultCPU, "defaultCPU", "CPU request and limit of a task container that sets neither")
	s(&c.DefaultMemory, "defaultMemory", "memory request and limit of a task container that sets neither")
	d(&c.ImagePullGracePeriod, "imagePullGracePeriod", "how long an image pull may back off before the attempt fails")
	d(&c.CreateContainerGracePeriod, "createContainerGracePeriod", "how long CreateContainerError may last before the attempt fails")
	d(&c.QueuedStatusDelay, "queuedStatusDelay", "how long a new pod's Queued (from its creation) and Running (from its start) statuses are held back, so that a short task costs one status write (the events are sent at once); 0: at once")
	d(&c.SaturatedStatusDelay, "saturatedStatusDelay", "how long queuedStatusDelay's hold extends while the executor or the API server is short of capacity (never shorter than queuedStatusDelay)")
	i(&c.MaxSystemFailures, "maxSystemFailures", "consecutive system failures tolerated before a TaskAction fails")
	i(&c.MaxConcurrentReconciles, "maxConcurrentReconciles", "reconcile workers")
	d(&c.RequeueDuration, "requeueDuration", "base delay of timed requeues (backoff, reservations)")
	fs.Float32Var(&c.KubeAPIQPS, flagPrefix+"kubeAPIQPS", c.KubeAPIQPS, "client-side QPS limit towards the API server")
	i(&c.KubeAPIBurst, "kubeAPIBurst", "client-side burst towards the API server")
	d(&c.GC.Interval, "gc.interval", "interval between garbage-collection sweeps (0 disables the collector)")
	d(&c.GC.MaxTTL, "gc.maxTTL", "how long a terminal TaskAction is kept")
	bindWebhookFlags(fs, &c.Webhook)
	s(&c.PodSecurity.Level, "podSecurity.level", "Pod Security Standards level task pods must meet: baseline, restricted or privileged")
	fs.Var(&c.PodSecurity.AllowedServiceAccounts, flagPrefix+"podSecurity.allowedServiceAccounts",
		"service accounts task pods may use, per namespace: ns=sa,ns=sa2,other=* (\"*\" as namespace: every other one); empty: any")
}

// namespaceList is the flag form of a list of namespaces: comma-separated,
// which String writes back for Load to re-apply.
type namespaceList []string

func (l *namespaceList) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the names of v; "" is the empty list.
func (l *namespaceList) Set(v string) error {
	var names []string
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			names = append(names, ns)
		}
	}
	*l = names
	return nil
}

// Type names the flag's value in --help.
func (l *namespaceList) Type() string { return "namespace,..." }

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
	if len(c.Namespaces) == 0 {
		c.Namespaces = nil // an empty list and none both mean every namespace
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// quantityKeys hold resource quantities, which YAML may read as numbers.
var quantityKeys = map[string]bool{"defaultCPU": true, "defaultMemory": true}

func isJSONNumber(raw json.RawMessage) bool {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return false
	}
	_, ok := v.(json.Number)
	return ok
}

// flyteSpellings are keys of the executor section as Flyte's executor spells
// them, accepted beside ours so that a Flyte deployment's file loads.
var flyteSpellings = map[string]string{"EventsServiceURL": "eventsServiceURL"}

func loadFile(path string, c *Config) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		if key := nonFiniteKey(raw); key != "" {
			return fmt.Errorf("config file %s: %s: NaN and infinities are not accepted", path, key)
		}
		return fmt.Errorf("config file %s: not valid YAML: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return fmt.Errorf("config file %s: the top level must be a mapping with a section %q", path, Section)
	}
	// A file shared with Flyte's other components holds their sections too
	// (storage, webhook, logger, plugins, tasks, ...): they are not ours to
	// judge. A near miss of ours is a typo, not another component's section.
	for _, k := range sortedKeys(top) {
		if k != Section && (strings.EqualFold(k, Section) || editDistance(k, Section) <= 2) {
			return fmt.Errorf("config file %s: unknown section %q (did you mean %q?)", path, k, Section)
		}
	}
	if err := loadFlyteSections(top, c, path); err != nil {
		return err
	}
	sec, ok := top[Section]
	if !ok || string(sec) == "null" {
		return nil
	}
	return decodeSection("", reflect.ValueOf(c).Elem(), sec, path)
}

// loadFlyteSections reads the sections the executor shares with Flyte's other
// components, as they write them: `storage:` and `plugins: logs:`.
func loadFlyteSections(top map[string]json.RawMessage, c *Config, path string) error {
	if raw, ok := top[StorageSection]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.Storage); err != nil {
			return fmt.Errorf("config file %s: %s: %v", path, StorageSection, err)
		}
	}
	plugins, ok := top["plugins"]
	if !ok || string(plugins) == "null" {
		return loadTaskPlugins(top, c, path)
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(plugins, &p); err != nil {
		return fmt.Errorf("config file %s: plugins must be a mapping", path)
	}
	if raw, ok := p["logs"]; ok && string(raw) != "null" {
		logs := TaskLogConfig{}
		if err := json.Unmarshal(raw, &logs); err != nil {
			return fmt.Errorf("config file %s: %s: %v", path, TaskLogSection, err)
		}
		c.TaskLogs = logs
	}
	if raw, ok := p["k8s"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.K8sPlugin); err != nil {
			return fmt.Errorf("config file %s: %s: %v", path, K8sPluginSection, err)
		}
	}
	return loadTaskPlugins(top, c, path)
}

func loadTaskPlugins(top map[string]json.RawMessage, c *Config, path string) error {
	raw, ok := top["tasks"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var tasks struct {
		TaskPlugins struct {
			DefaultForTaskTypes map[string]string `json:"default-for-task-types"`
		} `json:"task-plugins"`
	}
	if err := json.Unmarshal(raw, &tasks); err != nil {
		return fmt.Errorf("config file %s: %s: %v", path, TaskPluginsSection, err)
	}
	c.TaskPlugins = tasks.TaskPlugins.DefaultForTaskTypes
	return nil
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
	if prefix == "" {
		for flyte, ours := range flyteSpellings {
			fv, hasFlyte := m[flyte]
			if !hasFlyte {
				continue
			}
			if ov, hasOurs := m[ours]; hasOurs && !sameValue(fields[ours].Type(), fv, ov) {
				return fmt.Errorf("config file %s: %s and %s (Flyte's spelling) are both set, to %s and %s: keep one",
					path, ours, flyte, ov, fv)
			}
			m[ours] = fv
			delete(m, flyte)
		}
	}
	for _, k := range sortedKeys(m) {
		f, ok := fields[k]
		if !ok {
			return fmt.Errorf("config file %s: unknown key %q in section %s%s", path, prefix+k, Section, suggest(k, fields))
		}
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(Duration{}) {
			if err := decodeSection(prefix+k+".", f, m[k], path); err != nil {
				return err
			}
			continue
		}
		if quantityKeys[prefix+k] && isJSONNumber(m[k]) {
			// `defaultCPU: 2` is a quantity written as YAML reads a number.
			f.SetString(string(m[k]))
			continue
		}
		if err := json.Unmarshal(m[k], f.Addr().Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return fmt.Errorf("config file %s: %s must be %s, got a %s", path, prefix+k, typeName(f.Type()), te.Value)
			}
			return fmt.Errorf("config file %s: %s: %v", path, prefix+k, err)
		}
	}
	return nil
}

// nonFiniteKey finds the first key (dotted, in the section's terms for
// ours) whose value is .nan or .inf, which JSON cannot hold; "" if none.
func nonFiniteKey(raw []byte) string {
	var doc map[string]any
	if yamlv3.Unmarshal(raw, &doc) != nil {
		return ""
	}
	var walk func(prefix string, v any) string
	walk = func(prefix string, v any) string {
		switch t := v.(type) {
		case float64:
			if math.IsNaN(t) || math.IsInf(t, 0) {
				return prefix
			}
		case map[string]any:
			for _, k := range sortedKeys(t) {
				if p := walk(prefix+"."+k, t[k]); p != "" {
					return p
				}
			}
		case []any:
			for i, e := range t {
				if p := walk(fmt.Sprintf("%s[%d]", prefix, i), e); p != "" {
					return p
				}
			}
		}
		return ""
	}
	for _, k := range sortedKeys(doc) {
		if p := walk(k, doc[k]); p != "" {
			return strings.TrimPrefix(p, Section+".")
		}
	}
	return ""
}

// sameValue compares two spellings of one key as the key's type reads them.
func sameValue(t reflect.Type, a, b json.RawMessage) bool {
	va, vb := reflect.New(t), reflect.New(t)
	if json.Unmarshal(a, va.Interface()) != nil || json.Unmarshal(b, vb.Interface()) != nil {
		return false
	}
	return reflect.DeepEqual(va.Elem().Interface(), vb.Elem().Interface())
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(ServiceAccounts{}):
		return "a mapping from namespace to a list of service accounts"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Int:
		return "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}

// suggest names the key k was probably meant to be, if any.
func suggest(k string, fields map[string]reflect.Value) string {
	best, bestD := "", 3
	for name := range fields {
		d := editDistance(strings.ToLower(k), strings.ToLower(name))
		if d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// YAML renders c as a config file with the `executor:` section.
func (c Config) YAML() ([]byte, error) {
	if c.Namespaces == nil {
		c.Namespaces = []string{} // printed as [], not null: every namespace
	}
	return yaml.Marshal(map[string]Config{Section: c})
}

// String keeps durations readable in logs.
func (d Duration) String() string { return time.Duration(d.Duration).String() }
