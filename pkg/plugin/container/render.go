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

// placeholderName matches the inside of a placeholder Flyte's runtime contract
// renders: ".Name" or "$Name", spaces allowed around it, any letter case.
var placeholderName = regexp.MustCompile(`^\s*[.$]([A-Za-z][A-Za-z0-9_]*)\s*$`)

// TaskTemplatePath is what {{.TaskTemplatePath}} renders to: the template
// travels inline in the TaskAction, as in Flyte's executor.
const TaskTemplatePath = "inline://taskTemplate"

// emptyPrevCheckpoint is what {{.PrevCheckpointPrefix}} renders to on a first
// attempt: an empty argument the runtime can still parse.
const emptyPrevCheckpoint = `""`

// templateVars give the values of the placeholders, by lower-case name,
// computed when a placeholder asks for one (most strings have none).
type templateVars struct {
	ta      *flytev1.TaskAction
	attempt int32
	podName string
	// inputs render {{.Inputs.<name>}}, all of a pod's within a bound; nil
	// leaves them as they are (as Flyte does when it has no inputs).
	inputs *task.InputRenderer
}

// varsFor is the placeholder values of attempt (1-based) of ta, whose pod is podName.
func varsFor(ta *flytev1.TaskAction, attempt int32, podName string) templateVars {
	return templateVars{ta: ta, attempt: attempt, podName: podName}
}

// lookup is the value of the placeholder name (lower case); known is false
// for a name the runtime contract does not have, and a known placeholder
// that cannot be rendered for this TaskAction has why instead of a value.
func (v templateVars) lookup(name string) (value, why string, known bool) {
	ta, attempt := v.ta, v.attempt
	switch name {
	case "input", "inputprefix":
		if ta.Spec.InputURI == "" {
			return "", "spec.inputUri is empty", true
		}
		if name == "input" {
			return layout.InputURI(ta.Spec.InputURI), "", true
		}
		return layout.InputPrefix(ta.Spec.InputURI), "", true
	case "outputprefix", "rawoutputdataprefix", "checkpointoutputprefix":
		out := task.OutputPrefix(ta, attempt)
		switch {
		case out == "":
			return "", noOutput, true
		case name == "outputprefix":
			return out, "", true
		case name == "rawoutputdataprefix":
			return task.RawOutputDataPrefix(ta, attempt), "", true
		}
		return task.CheckpointPrefix(ta, attempt), "", true
	case "prevcheckpointprefix":
		if attempt <= 1 {
			return emptyPrevCheckpoint, "", true
		}
		if prev := task.PrevCheckpointPrefix(ta, attempt); prev != "" {
			return prev, "", true
		}
		return "", noOutput, true
	case "perretryuniquekey":
		return perRetryUniqueKey(v.podName), "", true
	case "tasktemplatepath":
		return TaskTemplatePath, "", true
	case "namespace":
		return ta.Namespace, "", true
	}
	return "", "", false
}

// noOutput is why the output placeholders cannot be rendered.
const noOutput = "spec.runOutputBase is empty"

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
		out[i] = replacePlaceholders(s, func(m, inside string) string {
			if in := v.inputMatch(m); in != nil {
				val, err := v.inputs.Value(in[1])
				if err != nil {
					bad = append(bad, fmt.Sprintf("placeholder %q in %s[%d] cannot be rendered: %v", m, field, i, err))
					return m
				}
				return val
			}
			sm := placeholderName.FindStringSubmatch(inside)
			if sm == nil {
				return m
			}
			name := strings.ToLower(sm[1])
			val, why, known := v.lookup(name)
			if !known {
				return m
			}
			if why != "" {
				bad = append(bad, fmt.Sprintf("placeholder %q in %s[%d] cannot be rendered: %s", m, field, i, why))
				return m
			}
			return val
		})
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return out, nil
}

// replacePlaceholders replaces every "{{...}}" of s (from each "{{" to the
// first "}}" after it, left to right) by what f returns for it and for what
// is inside it. A string without one is returned as it is.
func replacePlaceholders(s string, f func(m, inside string) string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			break
		}
		end := i + 2 + j + 2
		b.WriteString(rest[:i])
		b.WriteString(f(rest[i:end], rest[i+2:end-2]))
		rest = rest[end:]
	}
	if len(rest) == len(s) {
		return s
	}
	b.WriteString(rest)
	return b.String()
}

// inputMatch is the submatches of m as an {{.Inputs.x}} placeholder when
// the inputs were read (nil otherwise).
func (v templateVars) inputMatch(m string) []string {
	if v.inputs == nil {
		return nil
	}
	if in := task.InputPlaceholder.FindStringSubmatch(m); in != nil && in[0] == m {
		return in
	}
	return nil
}
