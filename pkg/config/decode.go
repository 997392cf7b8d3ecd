package config

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The decoder below reads a value parsed from YAML into a Go type the way
// Flyte's loader does (flytestdlib's viper accessor: mapstructure with
// WeaklyTypedInput, TagName "json", ZeroFields and its decode hooks), so that
// every file Flyte accepts for a key is accepted here with the same result:
//
//   - a type with UnmarshalJSON gets the value re-encoded as JSON; if it
//     refuses it, the value is decoded as if the method did not exist;
//   - a string becomes a time.Duration by time.ParseDuration, a []string by
//     splitting it on ",", a []byte by base64;
//   - a list of mappings becomes one mapping (later entries win): the form
//     Flyte's charts use for maps whose keys are case-sensitive;
//   - weak scalars: a bool becomes "1"/"0" or 1/0, a number a string or a
//     bool (non-zero), a string a number (Go syntax, "" is 0) or a bool
//     (strconv.ParseBool, "" is false); a float is truncated to an integer;
//   - one value where a list is expected is a list of that value; an empty
//     mapping is an empty list and an empty list an empty mapping;
//   - a mapping or list replaces the one already there; a struct keeps the
//     fields the value does not name;
//   - struct fields are matched by their json name, case-insensitively;
//     fields tagged ",inline" or ",squash" contribute their own fields.
//
// Errors name the key and what was expected.

// pathElem is one step from the file's top to a value.
type pathElem struct {
	name string
	kind byte // '.': a struct field, '[': a map key, '#': a list index
}

type keyPath []pathElem

func (p keyPath) field(name string) keyPath { return p.with(pathElem{name, '.'}) }
func (p keyPath) key(name string) keyPath   { return p.with(pathElem{name, '['}) }
func (p keyPath) index(i int) keyPath       { return p.with(pathElem{strconv.Itoa(i), '#'}) }

func (p keyPath) with(e pathElem) keyPath {
	out := make(keyPath, len(p), len(p)+1)
	copy(out, p)
	return append(out, e)
}

// String writes the path as the messages show it: keys of the executor
// section without "executor." (as in the flags and the validation messages),
// map keys and list indices in brackets: plugins.k8s.default-tolerations[0].key.
func (p keyPath) String() string {
	if len(p) > 1 && p[0].kind == '.' && p[0].name == Section {
		p = p[1:]
	}
	var b strings.Builder
	for i, e := range p {
		switch {
		case e.kind == '.' && i > 0:
			b.WriteString("." + e.name)
		case e.kind == '.':
			b.WriteString(e.name)
		default:
			b.WriteString("[" + e.name + "]")
		}
	}
	return b.String()
}

// decodeError is a value that does not fit its key.
type decodeError struct {
	path keyPath
	// msg follows the key: "must be an integer, got \"three\"", or, from a
	// type's own parser, ": invalid duration ...".
	msg string
}

func (e *decodeError) Error() string { return e.path.String() + e.msg }

var (
	unmarshalerType   = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	timeDurationType  = reflect.TypeOf(time.Duration(0))
	stringSliceType   = reflect.TypeOf([]string(nil))
	serviceAccountsTy = reflect.TypeOf(ServiceAccounts(nil))
	durationType      = reflect.TypeOf(Duration{})
)

// decodeValue decodes in (a value parsed from YAML, maps as map[string]any)
// into out.
func decodeValue(path keyPath, in any, out reflect.Value) error {
	if in == nil {
		// A null replaces what was there (ZeroFields). The loader drops null
		// values of keys before decoding, as viper does, so this is a null
		// inside a list.
		out.Set(reflect.Zero(out.Type()))
		return nil
	}
	t := out.Type()
	var ownErr error // the type's UnmarshalJSON refused the value
	if implementsUnmarshaler(t) {
		if v, ok, err := viaJSON(in, t); ok {
			out.Set(v)
			return nil
		} else {
			ownErr = err
		}
	}
	in, err := applyHooks(path, in, t)
	if err != nil {
		return err
	}
	// Decode into a scratch value, so that a refused fallback leaves out as it was.
	scratch := reflect.New(t).Elem()
	scratch.Set(out)
	if err := decodeKind(path, in, scratch); err != nil {
		// The type's own message is the better one when it is its own words
		// about the whole value; an error deeper down names the bad part.
		var de *decodeError
		var te *json.UnmarshalTypeError
		if ownErr != nil && !errors.As(ownErr, &te) && errors.As(err, &de) && len(de.path) == len(path) {
			return &decodeError{path, ": " + ownErr.Error()}
		}
		return err
	}
	out.Set(scratch)
	return nil
}

// implementsUnmarshaler is the condition of Flyte's JSON hook: the type, a
// pointer to it, or the element of a pointer, slice, map or array type has
// UnmarshalJSON.
func implementsUnmarshaler(t reflect.Type) bool {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Pointer, reflect.Slice:
		return t.Elem().Implements(unmarshalerType)
	}
	return false
}

// viaJSON re-encodes in as JSON and unmarshals it into a new t. ok is false
// when in cannot be encoded (then err is nil: the hook does not apply) or t
// refuses it (err says why).
func viaJSON(in any, t reflect.Type) (v reflect.Value, ok bool, err error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return reflect.Value{}, false, nil
	}
	p := reflect.New(t)
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return reflect.Value{}, false, err
	}
	return p.Elem(), true, nil
}

// applyHooks converts in before it is decoded into t, as Flyte's other
// decode hooks do.
func applyHooks(path keyPath, in any, t reflect.Type) (any, error) {
	if s, ok := in.(string); ok && t == timeDurationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, &decodeError{path, fmt.Sprintf(": invalid duration %q: use Go syntax such as \"90s\" or \"30m\"", s)}
		}
		return d, nil
	}
	if s, ok := in.(string); ok && t == stringSliceType {
		if s == "" {
			return []string{}, nil
		}
		return strings.Split(s, ","), nil
	}
	if list, ok := in.([]any); ok && t.Kind() == reflect.Map {
		merged := map[string]any{}
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return in, nil // decoded item by item below, which names the bad one
			}
			for k, v := range m {
				merged[k] = v
			}
		}
		return merged, nil
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		s := ""
		switch v := in.(type) {
		case string:
			s = v
		case []string:
			if len(v) == 0 {
				return in, nil
			}
			s = v[0]
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, &decodeError{path, ": not base64: " + err.Error()}
		}
		return b, nil
	}
	return in, nil
}

// kindOf groups kinds as the weak conversions do.
func kindOf(v reflect.Value) reflect.Kind {
	switch k := v.Kind(); k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return reflect.Int
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return reflect.Uint
	case reflect.Float32, reflect.Float64:
		return reflect.Float64
	default:
		return k
	}
}

func decodeKind(path keyPath, in any, out reflect.Value) error {
	data := reflect.Indirect(reflect.ValueOf(in))
	switch kindOf(out) {
	case reflect.Interface:
		out.Set(data)
		return nil
	case reflect.Bool:
		return decodeBool(path, data, out)
	case reflect.String:
		return decodeString(path, data, out)
	case reflect.Int:
		return decodeInt(path, data, out)
	case reflect.Uint:
		return decodeUint(path, data, out)
	case reflect.Float64:
		return decodeFloat(path, data, out)
	case reflect.Struct:
		return decodeStruct(path, data, out)
	case reflect.Map:
		return decodeMap(path, data, out)
	case reflect.Slice:
		return decodeSlice(path, data, out)
	case reflect.Pointer:
		p := reflect.New(out.Type().Elem())
		if err := decodeValue(path, in, p.Elem()); err != nil {
			return err
		}
		out.Set(p)
		return nil
	}
	return &decodeError{path, fmt.Sprintf(" has an unsupported type %s", out.Type())}
}

func mismatch(path keyPath, out reflect.Value, data reflect.Value) error {
	return &decodeError{path, fmt.Sprintf(" must be %s, got %s", typeName(out.Type()), describe(data))}
}

func unparsable(path keyPath, out reflect.Value, s string) error {
	return &decodeError{path, fmt.Sprintf(" must be %s, got %q", typeName(out.Type()), s)}
}

func decodeBool(path keyPath, data, out reflect.Value) error {
	switch kindOf(data) {
	case reflect.Bool:
		out.SetBool(data.Bool())
	case reflect.Int:
		out.SetBool(data.Int() != 0)
	case reflect.Uint:
		out.SetBool(data.Uint() != 0)
	case reflect.Float64:
		out.SetBool(data.Float() != 0)
	case reflect.String:
		s := data.String()
		b, err := strconv.ParseBool(s)
		switch {
		case err == nil:
			out.SetBool(b)
		case s == "":
			out.SetBool(false)
		default:
			return unparsable(path, out, s)
		}
	default:
		return mismatch(path, out, data)
	}
	return nil
}

func decodeString(path keyPath, data, out reflect.Value) error {
	switch kindOf(data) {
	case reflect.String:
		out.SetString(data.String())
	case reflect.Bool:
		if data.Bool() {
			out.SetString("1")
		} else {
			out.SetString("0")
		}
	case reflect.Int:
		out.SetString(strconv.FormatInt(data.Int(), 10))
	case reflect.Uint:
		out.SetString(strconv.FormatUint(data.Uint(), 10))
	case reflect.Float64:
		out.SetString(strconv.FormatFloat(data.Float(), 'f', -1, 64))
	case reflect.Slice:
		if data.Type().Elem().Kind() != reflect.Uint8 {
			return mismatch(path, out, data)
		}
		out.SetString(string(data.Bytes()))
	default:
		return mismatch(path, out, data)
	}
	return nil
}

func decodeInt(path keyPath, data, out reflect.Value) error {
	switch kindOf(data) {
	case reflect.Int:
		out.SetInt(data.Int())
	case reflect.Uint:
		out.SetInt(int64(data.Uint()))
	case reflect.Float64:
		out.SetInt(int64(data.Float()))
	case reflect.Bool:
		out.SetInt(map[bool]int64{true: 1}[data.Bool()])
	case reflect.String:
		s := data.String()
		if s == "" {
			s = "0"
		}
		i, err := strconv.ParseInt(s, 0, out.Type().Bits())
		if err != nil {
			return unparsable(path, out, data.String())
		}
		out.SetInt(i)
	default:
		return mismatch(path, out, data)
	}
	return nil
}

func decodeUint(path keyPath, data, out reflect.Value) error {
	switch kindOf(data) {
	case reflect.Int:
		out.SetUint(uint64(data.Int()))
	case reflect.Uint:
		out.SetUint(data.Uint())
	case reflect.Float64:
		out.SetUint(uint64(data.Float()))
	case reflect.Bool:
		out.SetUint(map[bool]uint64{true: 1}[data.Bool()])
	case reflect.String:
		s := data.String()
		if s == "" {
			s = "0"
		}
		u, err := strconv.ParseUint(s, 0, out.Type().Bits())
		if err != nil {
			return unparsable(path, out, data.String())
		}
		out.SetUint(u)
	default:
		return mismatch(path, out, data)
	}
	return nil
}

func decodeFloat(path keyPath, data, out reflect.Value) error {
	switch kindOf(data) {
	case reflect.Int:
		out.SetFloat(float64(data.Int()))
	case reflect.Uint:
		out.SetFloat(float64(data.Uint()))
	case reflect.Float64:
		out.SetFloat(data.Float())
	case reflect.Bool:
		out.SetFloat(map[bool]float64{true: 1}[data.Bool()])
	case reflect.String:
		s := data.String()
		if s == "" {
			s = "0"
		}
		f, err := strconv.ParseFloat(s, out.Type().Bits())
		if err != nil {
			return unparsable(path, out, data.String())
		}
		out.SetFloat(f)
	default:
		return mismatch(path, out, data)
	}
	return nil
}

// structField is a key of a struct: its json name and where it is.
type structField struct {
	name  string
	index []int
}

// fieldsOf lists the keys of struct type t in declaration order: json names
// (the Go name when the tag has none), with the fields of ",inline" and
// ",squash" structs in place; "-" and unexported fields are not keys.
func fieldsOf(t reflect.Type) []structField {
	var out []structField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct && (hasOpt(opts, "inline") || hasOpt(opts, "squash")) {
			for _, sub := range fieldsOf(f.Type) {
				out = append(out, structField{sub.name, append([]int{i}, sub.index...)})
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, structField{name, []int{i}})
	}
	return out
}

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// lookupKey finds the key of m that names field: exactly, else ignoring case
// (the first in sorted order, so the answer does not depend on map order).
func lookupKey(m map[string]any, field string) (string, bool) {
	if _, ok := m[field]; ok {
		return field, true
	}
	for _, k := range sortedKeys(m) {
		if strings.EqualFold(k, field) {
			return k, true
		}
	}
	return "", false
}

func decodeStruct(path keyPath, data, out reflect.Value) error {
	if data.Type() == out.Type() {
		out.Set(data)
		return nil
	}
	m, ok := data.Interface().(map[string]any)
	if !ok {
		return mismatch(path, out, data)
	}
	for _, f := range fieldsOf(out.Type()) {
		k, ok := lookupKey(m, f.name)
		if !ok {
			continue // a struct keeps the fields the value does not name
		}
		if err := decodeValue(path.field(f.name), m[k], out.FieldByIndex(f.index)); err != nil {
			return err
		}
	}
	return nil
}

func decodeMap(path keyPath, data, out reflect.Value) error {
	t := out.Type()
	fresh := reflect.MakeMap(t) // ZeroFields: the value replaces the map
	switch data.Kind() {
	case reflect.Map:
		m, ok := data.Interface().(map[string]any)
		if !ok {
			return mismatch(path, out, data)
		}
		for _, k := range sortedKeys(m) {
			key := reflect.New(t.Key()).Elem()
			if err := decodeValue(path.key(k), k, key); err != nil {
				return err
			}
			v := reflect.New(t.Elem()).Elem()
			if err := decodeValue(path.key(k), m[k], v); err != nil {
				return err
			}
			fresh.SetMapIndex(key, v)
		}
		out.Set(fresh)
		return nil
	case reflect.Slice:
		// A list whose items are not all mappings (those were merged by the
		// hook): each item in turn replaces the map, so a bad one is named.
		if data.Len() == 0 {
			out.Set(fresh)
			return nil
		}
		for i := 0; i < data.Len(); i++ {
			if err := decodeValue(path.index(i), data.Index(i).Interface(), out); err != nil {
				return err
			}
		}
		return nil
	}
	return mismatch(path, out, data)
}

func decodeSlice(path keyPath, data, out reflect.Value) error {
	t := out.Type()
	if data.Kind() != reflect.Slice && data.Kind() != reflect.Array {
		switch {
		case data.Kind() == reflect.Map && data.Len() == 0:
			out.Set(reflect.MakeSlice(t, 0, 0))
			return nil
		case data.Kind() == reflect.String && t.Elem().Kind() == reflect.Uint8:
			return decodeSlice(path, reflect.ValueOf([]byte(data.String())), out)
		}
		// One value where a list is expected: a list of it.
		return decodeSlice(path, reflect.ValueOf([]any{data.Interface()}), out)
	}
	fresh := reflect.MakeSlice(t, data.Len(), data.Len())
	for i := 0; i < data.Len(); i++ {
		if err := decodeValue(path.index(i), data.Index(i).Interface(), fresh.Index(i)); err != nil {
			return err
		}
	}
	out.Set(fresh)
	return nil
}

// typeName says what a key of type t must be.
func typeName(t reflect.Type) string {
	switch {
	case t == serviceAccountsTy:
		return "a mapping from namespace to a list of service accounts"
	case t == durationType || t == timeDurationType:
		return "a duration"
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem())
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings"
	case t.Kind() == reflect.Slice:
		return "a list"
	case t.Kind() == reflect.Map || t.Kind() == reflect.Struct:
		return "a mapping"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	}
	switch kindOf(reflect.Zero(t)) {
	case reflect.Int, reflect.Uint:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}

// describe names what a value parsed from YAML is.
func describe(v reflect.Value) string {
	switch kindOf(v) {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Uint, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return v.Type().String()
}
