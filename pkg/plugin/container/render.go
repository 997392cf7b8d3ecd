package container

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/task"
)

// placeholder matches any "{{ ... }}"; what is inside decides whether it is known.
var placeholder = regexp.MustCompile(`(?s)\{\{(.*?)\}\}`)

// placeholderName matches the inside of a known-form placeholder: ".name" (or
// "$name", the other spelling Flyte accepts), spaces allowed around it.
var placeholderName = regexp.MustCompile(`^\s*[.$]\s*([A-Za-z][A-Za-z0-9_]*)\s*$`)

// templateVars are the values of the placeholders, by lower-case name. A
// value in missing means the placeholder is known but cannot be rendered
// for this TaskAction (the reason says why).
type templateVars struct {
	values  map[string]string
	missing map[string]string
}

// varsFor computes the placeholder values of attempt (1-based) of ta.
func varsFor(ta *flytev1.TaskAction, attempt int32) templateVars {
	v := templateVars{values: map[string]string{}, missing: map[string]string{}}
	set := func(name, value, need string) {
		if value == "" && need != "" {
			v.missing[name] = need
			return
		}
		v.values[name] = value
	}
	noInput := ""
	if ta.Spec.InputURI == "" {
		noInput = "spec.inputUri is empty"
	}
	noOutput := ""
	if strings.Trim(ta.Spec.RunOutputBase, "/") == "" {
		noOutput = "spec.runOutputBase is empty"
	}
	set("input", ta.Spec.InputURI, noInput)
	set("inputprefix", task.InputPrefix(ta.Spec.InputURI), noInput)
	set("outputprefix", task.OutputPrefix(ta, attempt), noOutput)
	set("rawoutputdataprefix", task.RawOutputDataPrefix(ta, attempt), noOutput)
	set("checkpointoutputprefix", task.CheckpointPrefix(ta, attempt), noOutput)
	if attempt > 1 {
		set("prevcheckpointprefix", task.PrevCheckpointPrefix(ta, attempt), noOutput)
	} else {
		set("prevcheckpointprefix", "", "")
	}
	set("perretryuniquekey", identifier(PodName(ta.Name, attempt)), "")
	set("namespace", ta.Namespace, "")
	return v
}

// render replaces the placeholders of every string in in. field names the
// list in errors ("command", "args"). A placeholder that is unknown, or known
// but not renderable, is a task-specification error listing all of them.
func (v templateVars) render(field string, in []string) ([]string, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]string, len(in))
	var bad []string
	for i, s := range in {
		out[i] = placeholder.ReplaceAllStringFunc(s, func(m string) string {
			inner := placeholder.FindStringSubmatch(m)[1]
			sm := placeholderName.FindStringSubmatch(inner)
			if sm == nil {
				bad = append(bad, fmt.Sprintf("unknown placeholder %q in %s[%d]", m, field, i))
				return m
			}
			name := strings.ToLower(sm[1])
			if val, ok := v.values[name]; ok {
				return val
			}
			if why, ok := v.missing[name]; ok {
				bad = append(bad, fmt.Sprintf("placeholder %q in %s[%d] cannot be rendered: %s", m, field, i, why))
				return m
			}
			bad = append(bad, fmt.Sprintf("unknown placeholder %q in %s[%d]", m, field, i))
			return m
		})
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return out, nil
}
