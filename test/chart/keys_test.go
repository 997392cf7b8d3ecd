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
	rec("storage", reflect.TypeFor[config.StorageConfig]())
	rec("plugins.logs", reflect.TypeFor[config.TaskLogConfig]())
	rec("plugins.k8s", reflect.TypeFor[config.K8sPluginConfig]())
	keys = append(keys, "tasks.task-plugins.default-for-task-types")
	return keys
}
