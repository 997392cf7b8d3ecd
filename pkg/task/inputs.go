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

// MaxRenderedInputs bounds the text that all the {{.Inputs.<name>}} of one
// pod render to, together (1 MiB; the API server refuses a pod much larger):
// neither a large input nor many placeholders of it make the pod's text, or
// the time to build it, unbounded.
const MaxRenderedInputs = 1 << 20

// InputRenderer renders the {{.Inputs.<name>}} placeholders of one pod from
// its inputs, within MaxRenderedInputs for all of them.
type InputRenderer struct {
	inputs *core.LiteralMap
	left   int
}

// NewInputRenderer renders from inputs; nil inputs give a nil renderer.
func NewInputRenderer(inputs *core.LiteralMap) *InputRenderer {
	if inputs == nil {
		return nil
	}
	return &InputRenderer{inputs: inputs, left: MaxRenderedInputs}
}

// Value is the text {{.Inputs.<name>}} renders to, as Flyte renders it:
// primitives as their value, blobs and schemas as their URI, collections as
// "[a,b]". A missing input, an unsupported literal, or text beyond what is
// left of MaxRenderedInputs is an error.
func (r *InputRenderer) Value(name string) (string, error) {
	l, ok := r.inputs.GetLiterals()[name]
	if !ok {
		return "", fmt.Errorf("requested input is not found [%s]", name)
	}
	b := &boundedText{left: r.left}
	if err := writeLiteral(b, l); err != nil {
		return "", err
	}
	r.left = b.left
	return b.String(), nil
}

// InputValue is the text {{.Inputs.<name>}} renders to (InputRenderer.Value
// of a renderer of its own).
func InputValue(inputs *core.LiteralMap, name string) (string, error) {
	return (&InputRenderer{inputs: inputs, left: MaxRenderedInputs}).Value(name)
}

var errInputsTooLong = fmt.Errorf("the inputs rendered into the pod's commands and args exceed %d bytes", MaxRenderedInputs)

// boundedText is a strings.Builder that refuses to grow beyond left bytes.
type boundedText struct {
	strings.Builder
	left int
}

func (b *boundedText) write(s string) error {
	if len(s) > b.left {
		return errInputsTooLong
	}
	b.left -= len(s)
	b.WriteString(s)
	return nil
}

func writeLiteral(b *boundedText, l *core.Literal) error {
	switch v := l.GetValue().(type) {
	case *core.Literal_Collection:
		if err := b.write("["); err != nil {
			return err
		}
		for i, sub := range v.Collection.GetLiterals() {
			if i > 0 {
				if err := b.write(","); err != nil {
					return err
				}
			}
			if err := writeLiteral(b, sub); err != nil {
				return err
			}
		}
		return b.write("]")
	case *core.Literal_Scalar:
		s, err := scalarText(v.Scalar)
		if err != nil {
			return err
		}
		return b.write(s)
	}
	return fmt.Errorf("an input of type %T cannot be rendered into a command", l.GetValue())
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
