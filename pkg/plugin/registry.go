package plugin

import (
	"fmt"
	"sort"
)

// Registry maps task types to plugins, with an optional default for task types no plugin claims.
type Registry struct {
	byType map[string]Plugin
	def    Plugin
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byType: map[string]Plugin{}} }

// Register adds p for its task types; a task type may be claimed only once.
func (r *Registry) Register(p Plugin) error {
	for _, t := range p.TaskTypes() {
		if old, ok := r.byType[t]; ok {
			return fmt.Errorf("task type %q is claimed by plugins %q and %q", t, old.ID(), p.ID())
		}
		r.byType[t] = p
	}
	return nil
}

// SetDefault makes p serve every task type no plugin claims.
func (r *Registry) SetDefault(p Plugin) { r.def = p }

// Resolve returns the plugin for taskType.
func (r *Registry) Resolve(taskType string) (Plugin, error) {
	if p, ok := r.byType[taskType]; ok {
		return p, nil
	}
	if r.def != nil {
		return r.def, nil
	}
	return nil, fmt.Errorf("no plugin found for task type %q and no default plugin is registered", taskType)
}

// Plugins lists every distinct registered plugin, the default included.
func (r *Registry) Plugins() []Plugin {
	seen := map[string]bool{}
	var out []Plugin
	add := func(p Plugin) {
		if p != nil && !seen[p.ID()] {
			seen[p.ID()] = true
			out = append(out, p)
		}
	}
	add(r.def)
	for _, p := range r.byType {
		add(p)
	}
	return out
}

// MapTaskTypes routes task types to registered plugins by plugin ID, as
// Flyte's tasks.task-plugins.default-for-task-types does: an entry wins over
// the plugins' own claims. Entries that name no registered plugin are left
// out and returned (Flyte's charts name plugins a deployment may not have,
// so they are reported, not fatal), sorted by task type.
func (r *Registry) MapTaskTypes(m map[string]string) (unknown []string) {
	byID := map[string]Plugin{}
	for _, p := range r.Plugins() {
		byID[p.ID()] = p
	}
	for taskType, id := range m {
		p, ok := byID[id]
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%s: %s", taskType, id))
			continue
		}
		r.byType[taskType] = p
	}
	sort.Strings(unknown)
	return unknown
}
