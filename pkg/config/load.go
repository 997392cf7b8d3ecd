package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	d(&c.QueuedStatusDelay, "queuedStatusDelay", "how long a new pod's Queued status is held back from its creation, so that a pod that starts within it costs no write for Queued (the events are sent at once); 0: every status at once")
	d(&c.SaturatedStatusDelay, "saturatedStatusDelay", "how long queuedStatusDelay's hold extends while the executor or the API server is short of capacity (never shorter than queuedStatusDelay)")
	d(&c.ExecutingStatusDelay, "executingStatusDelay", "while the executor or the API server is short of capacity, how long a started pod's Executing status may be held back from its start; otherwise it is written at once")
	i(&c.MaxSystemFailures, "maxSystemFailures", "consecutive system failures tolerated before a TaskAction fails")
	i(&c.MaxConcurrentReconciles, "maxConcurrentReconciles", "reconcile workers")
	d(&c.RequeueDuration, "requeueDuration", "base delay of timed requeues (backoff, reservations)")
	fs.Float32Var(&c.KubeAPIQPS, flagPrefix+"kubeAPIQPS", c.KubeAPIQPS, "client-side QPS limit towards the API server")
	i(&c.KubeAPIBurst, "kubeAPIBurst", "client-side burst towards the API server")
	b(&c.KubeAPICompression, "kubeAPICompression", "ask the API server to gzip its answers and watch streams (fewer bytes, more CPU on both sides)")
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

// Load builds the effective configuration: defaults, then the YAML files of
// pattern (if not empty), then every --executor.* flag that was set on flags.
// It validates the result and touches nothing but the files.
//
// pattern is what Flyte's --config takes: a path, or a glob pattern whose
// files (in lexical order, as /etc/flyte/config.d/*.yaml holds a Flyte
// chart's ConfigMap keys) are merged as Flyte merges them.
func Load(pattern string, flags *pflag.FlagSet) (Config, error) {
	c := Default()
	if pattern != "" {
		files, err := configFiles(pattern)
		if err != nil {
			return Config{}, err
		}
		if err := loadFiles(files, &c); err != nil {
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
	// An empty list or mapping and none mean the same: every namespace, any
	// service account.
	if len(c.Namespaces) == 0 {
		c.Namespaces = nil
	}
	if len(c.PodSecurity.AllowedServiceAccounts) == 0 {
		c.PodSecurity.AllowedServiceAccounts = nil
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// configFiles resolves --config: a path as it is; a pattern (with *, ? or [)
// to the files it matches, in lexical order, directories left out as Flyte
// leaves them out. A pattern that matches no file is an error (Flyte would
// quietly look for ./config.yaml instead).
func configFiles(pattern string) ([]string, error) {
	if !strings.ContainsAny(pattern, `*?[\`) {
		return []string{pattern}, nil
	}
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("config file pattern %s: %v", pattern, err)
	}
	var files []string
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && !st.IsDir() {
			files = append(files, m)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("config file pattern %s: no file matches it", pattern)
	}
	return files, nil
}

// fileSections is what the executor reads of a Flyte configuration file:
// its own section and five of Flyte's, as Flyte's components register them.
// Every other section belongs to another component and is ignored.
type fileSections struct {
	// Executor is strict: a key it does not have is refused, with the
	// nearest one as a hint. Flyte's sections ignore unknown keys, as Flyte does.
	Executor Config        `json:"executor" config:"strict"`
	Storage  StorageConfig `json:"storage"`
	Otel     OtelConfig    `json:"otel"`
	Plugins  struct {
		Logs TaskLogConfig   `json:"logs"`
		K8s  K8sPluginConfig `json:"k8s"`
	} `json:"plugins"`
	Tasks struct {
		TaskPlugins struct {
			DefaultForTaskTypes map[string]string `json:"default-for-task-types"`
		} `json:"task-plugins"`
	} `json:"tasks"`
}

var fileSectionsType = reflect.TypeOf(fileSections{})

// loadFiles reads files onto c the way Flyte's loader (viper, then
// mapstructure) reads them: each file's keys are matched to c's keys
// case-insensitively; the files are merged in order (later files win per
// key, mappings merge key by key, lists and other values replace); keys whose
// value is null, and mappings left empty, count as absent; then the merged
// values are decoded weakly (see decode.go) over c, a mapping or list
// replacing the default rather than merging into it.
func loadFiles(files []string, c *Config) error {
	merged := map[string]any{}
	origin := map[string]string{} // where each merged value came from, for errors
	engines := map[string]any{}   // the other plugins' sections, merged the same way
	for _, f := range files {
		tree, other, err := readFile(f)
		if err != nil {
			return err
		}
		merge(merged, tree, nil, f, origin)
		merge(engines, other, nil, f, map[string]string{})
	}
	prune(merged)
	prune(engines)

	fs := fileSections{Executor: *c, Storage: c.Storage, Otel: c.Otel}
	fs.Plugins.Logs, fs.Plugins.K8s = c.TaskLogs, c.K8sPlugin
	fs.Tasks.TaskPlugins.DefaultForTaskTypes = c.TaskPlugins
	if err := decodeValue(nil, merged, reflect.ValueOf(&fs).Elem()); err != nil {
		var de *decodeError
		if errors.As(err, &de) {
			return fmt.Errorf("config file %s: %w", originOf(de.path, origin, files), err)
		}
		return err
	}
	*c = fs.Executor
	c.Storage, c.Otel = fs.Storage, fs.Otel
	c.TaskLogs, c.K8sPlugin = fs.Plugins.Logs, fs.Plugins.K8s
	c.TaskPlugins = fs.Tasks.TaskPlugins.DefaultForTaskTypes
	c.PluginSections = nil
	if len(engines) > 0 {
		c.PluginSections = engines
	}
	return nil
}

// otherPluginSections are the sections under `plugins:` other than those the
// loader reads itself (logs, k8s), keyed by their lower-case names and left
// as the file holds them, for the engine plugins to decode (PluginSection).
func otherPluginSections(top map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range top {
		if !strings.EqualFold(k, "plugins") {
			continue
		}
		plugins, _ := v.(map[string]any)
		for name, sec := range plugins {
			if l := strings.ToLower(name); l != "logs" && l != "k8s" {
				out[l] = sec
			}
		}
	}
	return out
}

// PluginSection decodes `plugins: <name>:` over out (which holds the
// plugin's defaults) as Flyte's loader would: case-insensitive keys, weak
// values, the list form of maps, a mapping or list replacing the default.
// A section the files do not hold leaves out as it is. Errors name the key.
func (c Config) PluginSection(name string, out any) error {
	v, ok := c.PluginSections[strings.ToLower(name)]
	if !ok {
		return nil
	}
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("plugins.%s: decode into a non-pointer %T", name, out)
	}
	if err := decodeValue(keyPath{{"plugins", '.'}, {name, '.'}}, v, rv.Elem()); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// readFile parses one file and keeps of it the sections the executor reads,
// with their keys spelt as the executor's fields are. Every error names the file.
func readFile(path string) (sections, engines map[string]any, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config file: %w", err)
	}
	var doc any
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("config file %s: not valid YAML: %w", path, err)
	}
	doc = stringKeys(doc)
	if doc == nil {
		return map[string]any{}, nil, nil
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("config file %s: the top level must be a mapping with a section %q", path, Section)
	}
	// Other components' sections are not ours to judge, but a near miss of
	// ours is a typo: no Flyte component has a section within two edits of it.
	for _, k := range sortedKeys(top) {
		if l := strings.ToLower(k); l != Section && editDistance(l, Section) <= 2 {
			return nil, nil, fmt.Errorf("config file %s: unknown section %q (did you mean %q?)", path, k, Section)
		}
	}
	n := normalizer{file: path}
	out, err := n.normalize(nil, top, fileSectionsType, false)
	if err != nil {
		return nil, nil, err
	}
	return out.(map[string]any), otherPluginSections(top), nil
}

// stringKeys turns mappings with keys that are not strings (`1: x`) into
// mappings keyed by their text, as viper does.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = stringKeys(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprintf("%v", k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = stringKeys(e)
		}
		return t
	}
	return v
}

// normalizer rewrites one file's values for the executor's types: the keys
// of every struct are replaced by the field's json name (Flyte's keys are
// case-insensitive), keys of no field are dropped (or refused in a strict
// section), map keys stay as written.
type normalizer struct{ file string }

func (n normalizer) normalize(path keyPath, v any, t reflect.Type, strict bool) (any, error) {
	if v == nil || implementsUnmarshaler(t) {
		return v, nil // decoded as a whole
	}
	switch t.Kind() {
	case reflect.Pointer:
		return n.normalize(path, v, t.Elem(), strict)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil // the decoder says what it should be
		}
		return n.normalizeStruct(path, m, t, strict)
	case reflect.Map:
		switch vv := v.(type) {
		case map[string]any:
			return n.normalizeMap(path, vv, t.Elem(), strict)
		case []any: // the list form: one mapping per item
			out := make([]any, len(vv))
			for i, item := range vv {
				out[i] = item
				if m, ok := item.(map[string]any); ok {
					nm, err := n.normalizeMap(path.index(i), m, t.Elem(), strict)
					if err != nil {
						return nil, err
					}
					out[i] = nm
				}
			}
			return out, nil
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return v, nil
		}
		list, ok := v.([]any)
		if !ok { // one value for a list of one
			return n.normalize(path, v, t.Elem(), strict)
		}
		out := make([]any, len(list))
		for i, item := range list {
			e, err := n.normalize(path.index(i), item, t.Elem(), strict)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return v, nil
}

func (n normalizer) normalizeMap(path keyPath, m map[string]any, elem reflect.Type, strict bool) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		ne, err := n.normalize(path.key(k), e, elem, strict)
		if err != nil {
			return nil, err
		}
		out[k] = ne
	}
	return out, nil
}

func (n normalizer) normalizeStruct(path keyPath, m map[string]any, t reflect.Type, strict bool) (map[string]any, error) {
	fields := fieldsOf(t)
	spellings := map[int][]string{} // field index in fields → the keys naming it, sorted
	for _, k := range sortedKeys(m) {
		i := -1
		for j, f := range fields {
			if f.name == k {
				i = j
				break
			}
			if i < 0 && strings.EqualFold(f.name, k) {
				i = j
			}
		}
		if i >= 0 {
			spellings[i] = append(spellings[i], k)
			continue
		}
		if strict {
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.name
			}
			return nil, fmt.Errorf("config file %s: unknown key %q in section %s%s", n.file, path.field(k).String(), Section, suggest(k, names))
		}
	}
	out := make(map[string]any, len(spellings))
	for i, f := range fields {
		keys := spellings[i]
		if len(keys) == 0 {
			continue
		}
		sf := t.FieldByIndex(f.index)
		for _, other := range keys[1:] {
			if !sameValue(sf.Type, m[keys[0]], m[other]) {
				return nil, fmt.Errorf("config file %s: %s and %s are one key (keys are case-insensitive), set to %s and %s: keep one",
					n.file, path.field(keys[0]), path.field(other), show(m[keys[0]]), show(m[other]))
			}
		}
		v, err := n.normalize(path.field(f.name), m[keys[0]], sf.Type, strict || sf.Tag.Get("config") == "strict")
		if err != nil {
			return nil, err
		}
		out[f.name] = v
	}
	return out, nil
}

// sameValue compares two values of one key as its type reads them.
func sameValue(t reflect.Type, a, b any) bool {
	va, vb := reflect.New(t).Elem(), reflect.New(t).Elem()
	if decodeValue(nil, a, va) != nil || decodeValue(nil, b, vb) != nil {
		return false
	}
	return reflect.DeepEqual(va.Interface(), vb.Interface())
}

func show(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprintf("%v", v)
}

// merge merges src (a later file) into dst as viper merges files: mappings
// key by key, anything else replaced, except that a mapping is kept when the
// later file gives the key a value that is not a mapping (viper cannot merge
// it and keeps what it has). origin records, by path, which file set a value.
func merge(dst, src map[string]any, prefix []string, file string, origin map[string]string) {
	for _, k := range sortedKeys(src) {
		p := append(prefix[:len(prefix):len(prefix)], k)
		if dm, ok := dst[k].(map[string]any); ok {
			if sm, ok := src[k].(map[string]any); ok {
				merge(dm, sm, p, file, origin)
			}
			continue
		}
		dst[k] = src[k]
		origin[strings.Join(p, "\x00")] = file
	}
}

// prune drops keys whose value is null and mappings left without keys: viper
// lists only keys that hold a value, so for Flyte they are absent and the
// default stays (`default-annotations: {}` keeps the default annotations;
// `[]` replaces them with none).
func prune(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(v)
			if len(v) == 0 {
				delete(m, k)
			}
		}
	}
}

// originOf is the file that set the value at path (or the deepest mapping
// above it that one file set).
func originOf(path keyPath, origin map[string]string, files []string) string {
	names := make([]string, len(path))
	for i, e := range path {
		names[i] = e.name
	}
	for i := len(names); i > 0; i-- {
		if f, ok := origin[strings.Join(names[:i], "\x00")]; ok {
			return f
		}
	}
	return files[len(files)-1]
}

// suggest names the key k was probably meant to be, if any.
func suggest(k string, names []string) string {
	best, bestD := "", 3
	for _, name := range names {
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
