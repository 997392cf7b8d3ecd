package v1

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	sigsjson "sigs.k8s.io/json"

	"github.com/taskaction/executor/pkg/quantity"
)

// maxDecodeErrors is how many undecodable values a DecodeError lists.
const maxDecodeErrors = 16

// FieldDecodeError is one value of a stored TaskAction that could not be decoded.
// +kubebuilder:object:generate=false
type FieldDecodeError struct {
	// Path is the value's place, e.g. status.pluginStateVersion or
	// spec.template.container.resources.limits.cpu.
	Path   string
	Reason string
}

// DecodeError lists the values of a stored TaskAction that could not be
// decoded (its TypeMeta, its ObjectMeta and everything else that could be
// are kept): the reconciler fails that TaskAction alone with InvalidSpec and
// this message.
// +kubebuilder:object:generate=false
type DecodeError struct {
	// Fields are the values that could not be decoded, in the order of the
	// type's fields (at most 16).
	Fields []FieldDecodeError
	// More counts those beyond Fields.
	More int
}

// Error names each value and why it does not decode ("path: reason; …").
func (e *DecodeError) Error() string {
	parts := make([]string, 0, len(e.Fields)+1)
	for _, f := range e.Fields {
		parts = append(parts, f.Path+": "+f.Reason)
	}
	if e.More > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", e.More))
	}
	return strings.Join(parts, "; ")
}

// Under is the part of e about the values below any of prefixes (e.g.
// "spec"), or nil.
func (e *DecodeError) Under(prefixes ...string) *DecodeError {
	if e == nil {
		return nil
	}
	var out DecodeError
	for _, f := range e.Fields {
		for _, p := range prefixes {
			if f.Path == p || strings.HasPrefix(f.Path, p+".") || strings.HasPrefix(f.Path, p+"[") {
				out.Fields = append(out.Fields, f)
				break
			}
		}
	}
	if len(out.Fields) == 0 {
		return nil
	}
	return &out
}

// DeepCopyInto copies e into out.
func (e *DecodeError) DeepCopyInto(out *DecodeError) {
	*out = *e
	out.Fields = append([]FieldDecodeError(nil), e.Fields...)
}

// DeepCopy is a copy of e (the generated deep copy of TaskAction uses it).
func (e *DecodeError) DeepCopy() *DecodeError {
	if e == nil {
		return nil
	}
	out := new(DecodeError)
	e.DeepCopyInto(out)
	return out
}

// DecodeError is what of this TaskAction, as it was read, could not be
// decoded, or nil. Decoding a TaskAction never fails on a value the Go types
// cannot hold (a status.attempts of -1, a quantity whose exponent would take
// forever to expand, a field of another type): the value is left at zero
// and named here, so that reading TaskActions (a list, a watch, the
// informer) never fails because of one of them.
func (ta *TaskAction) DecodeError() error {
	if ta.decodeErr == nil {
		return nil
	}
	return ta.decodeErr
}

// DecodeErrorUnder is the part of DecodeError about the values below any of
// prefixes (e.g. "spec", "metadata"), or nil.
func (ta *TaskAction) DecodeErrorUnder(prefixes ...string) error {
	if e := ta.decodeErr.Under(prefixes...); e != nil {
		return e
	}
	return nil
}

// plainTaskAction is TaskAction without its JSON decoder.
type plainTaskAction TaskAction

var plainTaskActionType = reflect.TypeFor[plainTaskAction]()

// UnmarshalJSON decodes a TaskAction in time and memory bounded by the size
// of b: every value that is decoded as a resource.Quantity is checked
// (pkg/quantity) before the library parses it. A value that cannot be
// decoded is left at zero and recorded (DecodeError); the rest of the object
// is kept. Only b that is not a JSON object is an error.
func (ta *TaskAction) UnmarshalJSON(b []byte) error {
	ta.decodeErr = nil
	p := (*plainTaskAction)(ta)
	if len(quantity.CheckTree(b, plainTaskActionType, "", 1)) == 0 {
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, p); err == nil {
			return nil
		}
	}
	d := lenient{}
	if !d.object(b, reflect.ValueOf(p).Elem(), "", 0) {
		return errors.New("a TaskAction is a JSON object")
	}
	if len(d.errs) > 0 {
		ta.decodeErr = &DecodeError{Fields: d.errs, More: d.more}
	}
	return nil
}

// lenient decodes what it can of a JSON document into a Go value, guided by
// the value's type, and records what it cannot. Each level of the type costs
// at most one pass over its part of the document.
type lenient struct {
	errs []FieldDecodeError
	more int
}

func (d *lenient) fail(path string, err error) {
	if len(d.errs) >= maxDecodeErrors {
		d.more++
		return
	}
	if path == "" {
		path = "(the object)"
	}
	d.errs = append(d.errs, FieldDecodeError{Path: path, Reason: reason(err)})
}

func unmarshal(raw []byte, v any) error { return sigsjson.UnmarshalCaseSensitivePreserveInts(raw, v) }

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// value decodes raw into v (addressable).
func (d *lenient) value(raw []byte, v reflect.Value, path string, depth int) {
	t := v.Type()
	custom := t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType)
	var err error
	if custom || !quantity.Contains(t) {
		if quantity.Contains(t) { // a resource.Quantity itself
			if err := quantity.CheckJSON(raw); err != nil {
				d.fail(path, err)
				return
			}
		}
		if err = unmarshal(raw, v.Addr().Interface()); err == nil {
			return
		}
		if custom {
			d.fail(path, err)
			return
		}
		// Find what failed inside.
	}
	if depth >= quantity.MaxDepth {
		d.fail(path, errors.New("nested too deeply"))
		return
	}
	isNull := string(raw) == "null"
	switch t.Kind() {
	case reflect.Pointer:
		if isNull {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.value(raw, v.Elem(), path, depth+1)
	case reflect.Struct:
		if !d.object(raw, v, path, depth) {
			d.fail(path, errors.New("must be an object"))
		}
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return
		}
		var items []quantity.Span
		if err := unmarshal(raw, &items); err != nil {
			d.fail(path, errors.New("must be a list"))
			return
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, item := range items {
			d.value(item, s.Index(i), path+"["+strconv.Itoa(i)+"]", depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if isNull {
			v.SetZero()
			return
		}
		var obj map[string]quantity.Span
		if err := unmarshal(raw, &obj); err != nil || t.Key().Kind() != reflect.String {
			d.fail(path, errors.New("must be an object"))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(t, len(obj)))
		}
		for _, k := range sortedKeys(obj) {
			key := reflect.New(t.Key()).Elem()
			key.SetString(k)
			elem := reflect.New(t.Elem()).Elem()
			d.value(obj[k], elem, quantity.JoinKey(path, k), depth+1)
			v.SetMapIndex(key, elem)
		}
	default:
		if err == nil { // an array of quantities: no type here has one
			err = errors.New("holds quantities this decoder does not check")
		}
		d.fail(path, err)
	}
}

// object decodes the JSON object raw field by field into struct v; it says
// false when raw is not an object (null leaves v as it is).
func (d *lenient) object(raw []byte, v reflect.Value, path string, depth int) bool {
	var obj map[string]quantity.Span
	if err := unmarshal(raw, &obj); err != nil {
		return false
	}
	for _, f := range quantity.JSONFields(v.Type()) {
		val, ok := obj[f.Name] // case-sensitive, as the API machinery decodes
		if !ok {
			continue
		}
		d.value(val, fieldAlloc(v, f.Index), quantity.JoinKey(path, f.Name), depth+1)
	}
	return true
}

// fieldAlloc is v's field at index, allocating embedded pointers on the way.
func fieldAlloc(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

func sortedKeys(m map[string]quantity.Span) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// reason is a decode error in words, without Go's package paths.
func reason(err error) string {
	if err == nil {
		return "does not decode"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("a JSON %s does not fit %s", te.Value, strings.TrimPrefix(te.Type.String(), "*"))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
