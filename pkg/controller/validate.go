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
// decoder's error, in one message that names every field at fault. A
// TaskAction whose stored values could not all be read (its spec or its
// status: a quantity refused before its exponent was expanded, an integer its
// Go type cannot hold) fails with only that, naming each value: what else
// is missing may be a value left at zero by the read.
func specError(ta *flytev1.TaskAction, t *task.Task, decodeErr error) error {
	if err := readError(ta); err != nil {
		return err
	}
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

// readError is why a TaskAction of any kind (a task or a condition) cannot
// run because what is stored could not all be read (TaskAction.DecodeError),
// or nil. The TaskAction fails alone with InvalidSpec; the others are read
// and run as usual.
func readError(ta *flytev1.TaskAction) error {
	return ta.DecodeError()
}
