package plugin

import "fmt"

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
