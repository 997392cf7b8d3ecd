package task

import (
	"fmt"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// FieldError says which field of the TaskAction could not be decoded, and why.
// The reconciler fails such a TaskAction with InvalidSpec and this message.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// FromTaskAction decodes the task of a TaskAction from whichever form it carries.
// A *FieldError names the field at fault.
func FromTaskAction(ta *flytev1.TaskAction) (*Task, error) {
	if ta.Spec.TaskTemplate == nil {
		return nil, fieldErr("spec.taskTemplate", "is required for a task")
	}
	t, err := fromTyped(ta.Spec.TaskTemplate, "spec.taskTemplate")
	if err != nil {
		return nil, err
	}
	if t.Type == "" {
		t.Type = ta.Spec.TaskType
	}
	if ta.Spec.Interruptible != nil {
		t.Interruptible = *ta.Spec.Interruptible
	}
	t.ID.Project, t.ID.Domain = ta.Spec.Project, ta.Spec.Domain
	return t, nil
}
