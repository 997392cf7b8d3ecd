package cache

import (
	"context"
	"fmt"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// InputsReader reads a task's inputs (storage.Store does).
type InputsReader interface {
	ReadInputs(ctx context.Context, inputURI string) (*core.LiteralMap, error)
}

// TaskKey is the cache key of a task run as Flyte's executor computes it:
// caching is on when the template's metadata.discoverable is set; the key
// covers the task identity (not its version), the interface, the inputs at
// inputURI (read only when the interface declares inputs) less
// metadata.cache_ignore_input_vars, and version (the TaskAction's
// spec.cacheKey). The template's identifier is used as it is, for the
// identity hash and for the key's scope: an identifier without an org hashes
// and is scoped without one. enabled=false: the task does not use the cache.
// A storage error is returned as is: the caller cannot know the key.
//
// A template without an interface is keyed as one with an empty interface
// (Flyte's executor computes no key for it, and runs it without the cache).
func TaskKey(ctx context.Context, r InputsReader, tmpl *core.TaskTemplate, inputURI, version string) (key Key, enabled bool, err error) {
	if !tmpl.GetMetadata().GetDiscoverable() {
		return Key{}, false, nil
	}
	id := tmpl.GetId()
	if id == nil {
		return Key{}, true, fmt.Errorf("cache key: a discoverable task has no identifier")
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
