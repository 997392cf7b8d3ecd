package chart

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/spf13/pflag"

	"github.com/taskaction/executor/pkg/config"
)

// configKeys are the executor section's keys, from its flags: --executor.<key>.
func configKeys() []string {
	fs := pflag.NewFlagSet("executor", pflag.ContinueOnError)
	d := config.Default()
	config.BindFlags(fs, &d)
	var keys []string
	fs.VisitAll(func(f *pflag.Flag) { keys = append(keys, f.Name) })
	return keys
}

// Keys of Flyte's sections that the executor accepts so that Flyte's files load,
// and does not use: the chart need not set them.
var unusedFlyteKeys = map[string]bool{
	"storage.enable-multicontainer": true,
	"storage.cache":                 true,
	"storage.signedUrl":             true,
	"storage.redis":                 true,
}

// flyteSectionKeys are the keys the executor reads from Flyte's sections, from
// the json names of the types it decodes them into.
func flyteSectionKeys() []string {
	var keys []string
	var rec func(prefix string, t reflect.Type)
	rec = func(prefix string, t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			ft := f.Type
			if f.Anonymous && name == "" {
				rec(prefix, ft)
				continue
			}
			key := prefix + "." + name
			if unusedFlyteKeys[key] {
				continue
			}
			if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(reflect.TypeFor[json.Unmarshaler]()) {
				rec(key, ft)
				continue
			}
			keys = append(keys, key)
		}
	}
	for field, section := range flyteSections {
		if section == "" {
			continue
		}
		f, _ := reflect.TypeFor[config.Config]().FieldByName(field)
		if f.Type.Kind() == reflect.Struct {
			rec(section, f.Type)
		} else {
			keys = append(keys, section)
		}
	}
	return keys
}

// flyteSections are the fields of config.Config read from Flyte's sections
// (json "-": not in `executor:`), and where each lives in the file.
var flyteSections = map[string]string{
	"Storage":     config.StorageSection,
	"TaskLogs":    config.TaskLogSection,
	"K8sPlugin":   config.K8sPluginSection,
	"TaskPlugins": config.TaskPluginsSection + ".default-for-task-types",
	"Otel":        config.OtelSection,
	// The other plugins.<name> sections (an engine plugin's own) have no fixed
	// keys: config.plugins passes any of them to the file as it is.
	"PluginSections": "",
}

// unmappedSections are Flyte-section fields of config.Config this test does not
// know: a section added to the executor must be added to flyteSections and to
// the chart's values.
func unmappedSections() []string {
	var out []string
	t := reflect.TypeFor[config.Config]()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("json") == "-" {
			if _, ok := flyteSections[f.Name]; !ok {
				out = append(out, f.Name)
			}
		}
	}
	return out
}
