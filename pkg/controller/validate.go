package controller

import (
	"fmt"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/task"
)

// missingFields lists the action-level fields a task action needs and does
// not have (the template's own fields are the task decoder's to check).
func missingFields(ta *flytev1.TaskAction, t *task.Task) []string {
	s := ta.Spec
	var missing []string
	for _, f := range []struct {
		name  string
		empty bool
	}{
		{"runName", s.RunName == ""},
		{"project", s.Project == ""},
		{"domain", s.Domain == ""},
		{"actionName", s.ActionName == ""},
		{"taskType", s.TaskType == "" && (t == nil || t.Type == "")},
		{"inputUri", s.InputURI == ""},
		{"runOutputBase", s.RunOutputBase == ""},
	} {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	return missing
}

// specError is why a task action's spec cannot run: missing fields and the
// decoder's error, in one message that names every field at fault.
func specError(ta *flytev1.TaskAction, t *task.Task, decodeErr error) error {
	var parts []string
	if m := missingFields(ta, t); len(m) > 0 {
		parts = append(parts, "required spec fields are missing: "+strings.Join(m, ", "))
	}
	if decodeErr != nil {
		parts = append(parts, decodeErr.Error())
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(parts, "; "))
}
