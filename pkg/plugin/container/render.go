package container

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/task"
)

// placeholder matches any "{{ ... }}"; what is inside decides whether it is one we render.
var placeholder = regexp.MustCompile(`(?s)\{\{(.*?)\}\}`)

// placeholderName matches the inside of a placeholder Flyte's runtime contract
// renders: ".Name" or "$Name", spaces allowed around it, any letter case.
var placeholderName = regexp.MustCompile(`^\s*[.$]([A-Za-z][A-Za-z0-9_]*)\s*$`)

// TaskTemplatePath is what {{.TaskTemplatePath}} renders to: the template
// travels inline in the TaskAction, as in Flyte's executor.
const TaskTemplatePath = "inline://taskTemplate"

// emptyPrevCheckpoint is what {{.PrevCheckpointPrefix}} renders to on a first
// attempt: an empty argument the runtime can still parse.
const emptyPrevCheckpoint = `""`

// templateVars are the values of the placeholders, by lower-case name. A
// value in missing means the placeholder is known but cannot be rendered
// for this TaskAction (the reason says why).
type templateVars struct {
	values  map[string]string
	missing map[string]string
	// inputs render {{.Inputs.<name>}}, all of a pod's within a bound; nil
	// leaves them as they are (as Flyte does when it has no inputs).
	inputs *task.InputRenderer
}

// varsFor computes the placeholder values of attempt (1-based) of ta, whose pod is podName.
func varsFor(ta *flytev1.TaskAction, attempt int32, podName string) templateVars {
	v := templateVars{values: map[string]string{}, missing: map[string]string{}}
	set := func(name, value, need string) {
		if need != "" {
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
	if task.OutputPrefix(ta, attempt) == "" {
		noOutput = "spec.runOutputBase is empty"
	}
	set("input", layout.InputURI(ta.Spec.InputURI), noInput)
	set("inputprefix", layout.InputPrefix(ta.Spec.InputURI), noInput)
	set("outputprefix", task.OutputPrefix(ta, attempt), noOutput)
	set("rawoutputdataprefix", task.RawOutputDataPrefix(ta, attempt), noOutput)
	set("checkpointoutputprefix", task.CheckpointPrefix(ta, attempt), noOutput)
	if prev := task.PrevCheckpointPrefix(ta, attempt); prev != "" {
		set("prevcheckpointprefix", prev, "")
	} else if attempt > 1 {
		set("prevcheckpointprefix", "", noOutput)
	} else {
		set("prevcheckpointprefix", emptyPrevCheckpoint, "")
	}
	set("perretryuniquekey", perRetryUniqueKey(podName), "")
	set("tasktemplatepath", TaskTemplatePath, "")
	set("namespace", ta.Namespace, "")
	return v
}

// render replaces the placeholders it knows in every string of in, and
// {{.Inputs.x}} when the inputs were read; every other "{{...}}" (a
// go-template in a kubectl command, flyte-sdk's {{.runName}}) is left as it is. field names the list in
// errors. A known placeholder that cannot be rendered is a
// task-specification error listing all of them.
func (v templateVars) render(field string, in []string) ([]string, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]string, len(in))
	var bad []string
	for i, s := range in {
		out[i] = placeholder.ReplaceAllStringFunc(s, func(m string) string {
			if in := task.InputPlaceholder.FindStringSubmatch(m); in != nil && in[0] == m && v.inputs != nil {
				val, err := v.inputs.Value(in[1])
				if err != nil {
					bad = append(bad, fmt.Sprintf("placeholder %q in %s[%d] cannot be rendered: %v", m, field, i, err))
					return m
				}
				return val
			}
			sm := placeholderName.FindStringSubmatch(placeholder.FindStringSubmatch(m)[1])
			if sm == nil {
				return m
			}
			name := strings.ToLower(sm[1])
			if val, ok := v.values[name]; ok {
				return val
			}
			if why, ok := v.missing[name]; ok {
				bad = append(bad, fmt.Sprintf("placeholder %q in %s[%d] cannot be rendered: %s", m, field, i, why))
			}
			return m
		})
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return out, nil
}
