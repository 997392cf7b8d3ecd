package task

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

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

func itoa(i int) string { return strconv.Itoa(i) }

// FromTaskAction decodes the task of a TaskAction from whichever form it
// carries: Flyte's serialized template in spec.taskTemplate or the typed
// spec.template. A *FieldError names the field at fault.
func FromTaskAction(ta *flytev1.TaskAction) (*Task, error) {
	if err := specDecodeError(ta); err != nil {
		return nil, err
	}
	var (
		t   *Task
		err error
	)
	switch hasBytes, hasTyped := len(ta.Spec.TaskTemplate) > 0, ta.Spec.Template != nil; {
	case hasBytes && hasTyped:
		return nil, fieldErr("spec", "a task carries exactly one of spec.taskTemplate and spec.template, not both")
	case hasBytes:
		t, err = fromFlyte(ta.Spec.TaskTemplate, "spec.taskTemplate")
	case hasTyped:
		t, err = fromTyped(ta.Spec.Template, "spec.template")
	default:
		return nil, fieldErr("spec.taskTemplate", "is required for a task (or the typed spec.template)")
	}
	if err != nil {
		return nil, err
	}
	if t.Type == "" {
		t.Type = ta.Spec.TaskType
	}
	if ta.Spec.Interruptible != nil {
		t.Interruptible = *ta.Spec.Interruptible
	}
	if t.Form == FormTyped {
		t.ID.Project, t.ID.Domain = ta.Spec.Project, ta.Spec.Domain
		// The typed form has no discoverable flag: a cache key turns caching on.
		t.Cache.Enabled = ta.Spec.CacheKey != ""
	}
	if ta.Spec.RunOutputBase != "" {
		if _, err := url.Parse(ta.Spec.RunOutputBase); err != nil {
			return nil, fieldErr("spec.runOutputBase", "is not a URL: %v", err)
		}
	}
	return t, nil
}

// specDecodeError is the *FieldError of the values of ta's spec that could
// not be decoded when it was read (TaskAction.DecodeError), naming each.
func specDecodeError(ta *flytev1.TaskAction) error {
	var de *flytev1.DecodeError
	if !errors.As(ta.DecodeErrorUnder("spec"), &de) {
		return nil
	}
	reasons := []string{de.Fields[0].Reason}
	for _, f := range de.Fields[1:] {
		reasons = append(reasons, f.Path+": "+f.Reason)
	}
	return &FieldError{Field: de.Fields[0].Path, Reason: strings.Join(reasons, "; ")}
}
