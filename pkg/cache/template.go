package cache

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// InputsReader reads a task's inputs (storage.Store does).
type InputsReader interface {
	ReadInputs(ctx context.Context, inputURI string) (*core.LiteralMap, error)
}

// TaskKey is the cache key of a task run as Flyte computes it: caching is on
// when the template's metadata.discoverable is set; the key covers the task
// identity (not its version), the interface, the inputs at inputURI (read
// only when the interface declares inputs) less metadata.cache_ignore_input_vars,
// and version (the TaskAction's spec.cacheKey). A task identifier without an
// org is scoped by DefaultOrg. enabled=false: the task does not use the cache.
// A storage error is returned as is: the caller cannot know the key.
func TaskKey(ctx context.Context, r InputsReader, tmpl *core.TaskTemplate, inputURI, version string) (key Key, enabled bool, err error) {
	if !tmpl.GetMetadata().GetDiscoverable() {
		return Key{}, false, nil
	}
	if tmpl.GetId() == nil {
		return Key{}, true, fmt.Errorf("cache key: a discoverable task has no identifier")
	}
	id := tmpl.GetId()
	if id.GetOrg() == "" {
		id = proto.CloneOf(id)
		id.Org = DefaultOrg
	}
	iface := tmpl.GetInterface()
	if iface == nil {
		iface = &core.TypedInterface{}
	}
	var inputs *core.LiteralMap
	if iface.GetInputs() != nil {
		if inputs, err = r.ReadInputs(ctx, inputURI); err != nil {
			return Key{}, true, fmt.Errorf("cache key: reading the inputs: %w", err)
		}
	}
	k, err := ComputeKey(KeyInput{Task: id, Interface: iface, Inputs: inputs,
		IgnoreInputs: tmpl.GetMetadata().GetCacheIgnoreInputVars(), Version: version})
	return k, true, err
}
