package task

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// InputPlaceholder matches Flyte's {{.Inputs.<name>}} (or {{$Inputs.<name>}},
// any letter case of "Inputs", spaces allowed); group 1 is the input's name.
var InputPlaceholder = regexp.MustCompile(`(?i)\{\{\s*[.$]Inputs\.([^}\s]+)\s*\}\}`)

// ReferencesInputs says whether the task's command or args render an input's
// value, so that its inputs must be read before its pod can be built.
func (t *Task) ReferencesInputs() bool {
	if t == nil {
		return false
	}
	var all []string
	if c := t.Container; c != nil {
		all = append(append(all, c.Command...), c.Args...)
	}
	if t.PodSpec != nil {
		for _, c := range t.PodSpec.Containers {
			all = append(append(all, c.Command...), c.Args...)
		}
	}
	for _, s := range all {
		if InputPlaceholder.MatchString(s) {
			return true
		}
	}
	return false
}

// InputValue is the text {{.Inputs.<name>}} renders to, as Flyte renders it:
// primitives as their value, blobs and schemas as their URI, collections as
// "[a,b]". A missing input or an unsupported literal is an error.
func InputValue(inputs *core.LiteralMap, name string) (string, error) {
	l, ok := inputs.GetLiterals()[name]
	if !ok {
		return "", fmt.Errorf("requested input is not found [%s]", name)
	}
	return literalText(l)
}

func literalText(l *core.Literal) (string, error) {
	switch v := l.GetValue().(type) {
	case *core.Literal_Collection:
		parts := make([]string, 0, len(v.Collection.GetLiterals()))
		for _, sub := range v.Collection.GetLiterals() {
			s, err := literalText(sub)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ",") + "]", nil
	case *core.Literal_Scalar:
		return scalarText(v.Scalar)
	}
	return "", fmt.Errorf("an input of type %T cannot be rendered into a command", l.GetValue())
}

func scalarText(s *core.Scalar) (string, error) {
	switch v := s.GetValue().(type) {
	case *core.Scalar_Primitive:
		switch p := v.Primitive.GetValue().(type) {
		case *core.Primitive_Integer:
			return fmt.Sprint(p.Integer), nil
		case *core.Primitive_Boolean:
			return fmt.Sprint(p.Boolean), nil
		case *core.Primitive_FloatValue:
			return fmt.Sprint(p.FloatValue), nil
		case *core.Primitive_StringValue:
			return p.StringValue, nil
		case *core.Primitive_Datetime:
			return p.Datetime.AsTime().Format("2006-01-02T15:04:05.999999999Z07:00"), nil
		case *core.Primitive_Duration:
			return p.Duration.AsDuration().String(), nil
		}
	case *core.Scalar_Blob:
		return v.Blob.GetUri(), nil
	case *core.Scalar_Schema:
		return v.Schema.GetUri(), nil
	}
	return "", fmt.Errorf("an input of type %T cannot be rendered into a command", s.GetValue())
}
