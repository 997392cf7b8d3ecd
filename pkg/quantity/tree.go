package quantity

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// PathError is a value at Path (e.g. spec.containers[0].resources.limits.cpu)
// that could not be decoded.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }

// MaxDepth is how deep CheckTree follows a document; deeper values are an
// error (the Go types the executor decodes are far shallower).
const MaxDepth = 64

// CheckTree checks, with CheckJSON, every value of the JSON document raw that
// decoding raw into a value of type t would read as a resource.Quantity, and
// returns at most limit errors (limit > 0), each with its path below path.
// It descends only into the parts of raw whose Go type can hold a quantity
// (Contains), matching object keys to fields as encoding/json does (exactly
// or in another letter case), and skips the rest without decoding it: its
// work is at most the size of raw for each level of t, and it allocates
// nothing for a document without a fault. A value of the wrong JSON kind,
// or raw that is not JSON, is left to the decoder, which refuses it before it
// parses any quantity.
func CheckTree(raw []byte, t reflect.Type, path string, limit int) []*PathError {
	w := walker{limit: limit, root: path}
	w.walk(raw, t, 0)
	return w.errs
}

type walker struct {
	limit int
	root  string
	stack []segment
	errs  []*PathError
}

// segment is one step of the path to the value being checked: a key, or an index.
type segment struct {
	key   string
	index int
}

func (w *walker) path() string {
	p := w.root
	for _, s := range w.stack {
		if s.index >= 0 {
			p += "[" + strconv.Itoa(s.index) + "]"
		} else {
			p = JoinKey(p, s.key)
		}
	}
	return p
}

func (w *walker) fail(err error) {
	w.errs = append(w.errs, &PathError{Path: w.path(), Err: err})
}

func (w *walker) walk(raw []byte, t reflect.Type, depth int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(w.errs) >= w.limit || !Contains(t) {
		return
	}
	if t == quantityType {
		if err := CheckJSON(raw); err != nil {
			w.fail(err)
		}
		return
	}
	if depth >= MaxDepth {
		w.fail(errTooDeep)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		eachMember(raw, func(key string, val []byte) {
			if f := FieldOf(t, key); f != nil && Contains(f.Type) {
				w.stack = append(w.stack, segment{key: key, index: -1})
				w.walk(val, f.Type, depth+1)
				w.stack = w.stack[:len(w.stack)-1]
			}
		})
	case reflect.Slice, reflect.Array:
		i := 0
		eachElement(raw, func(val []byte) {
			w.stack = append(w.stack, segment{index: i})
			w.walk(val, t.Elem(), depth+1)
			w.stack = w.stack[:len(w.stack)-1]
			i++
		})
	case reflect.Map:
		eachMember(raw, func(key string, val []byte) {
			w.stack = append(w.stack, segment{key: key, index: -1})
			w.walk(val, t.Elem(), depth+1)
			w.stack = w.stack[:len(w.stack)-1]
		})
	}
}

type depthError struct{}

func (depthError) Error() string {
	return "nested more than " + strconv.Itoa(MaxDepth) + " levels deep"
}

var errTooDeep error = depthError{}

// eachMember calls f with each member of the JSON object raw, its key
// unquoted; it stops at anything that is not an object or not JSON.
func eachMember(raw []byte, f func(key string, val []byte)) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return
	}
	for i < len(raw) && raw[i] == '"' {
		end := skipString(raw, i)
		if end < 0 {
			return
		}
		key, ok := unquote(raw[i:end])
		i = skipSpace(raw, end)
		if !ok || i >= len(raw) || raw[i] != ':' {
			return
		}
		start := skipSpace(raw, i+1)
		end = skipValue(raw, start)
		if end < 0 {
			return
		}
		f(key, raw[start:end])
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i = skipSpace(raw, i+1)
	}
}

// eachElement calls f with each element of the JSON array raw; it stops at
// anything that is not an array or not JSON.
func eachElement(raw []byte, f func(val []byte)) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return
	}
	for i < len(raw) {
		end := skipValue(raw, i)
		if end < 0 {
			return
		}
		f(raw[i:end])
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i = skipSpace(raw, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString is the index after the JSON string at b[i] (a quote), or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue is the index after the JSON value at b[i], or -1. For JSON it
// is exact; for what is not JSON, the decoder refuses the document anyway.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// unquote is the text of the JSON string s (with its quotes).
func unquote(s []byte) (string, bool) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1 : len(s)-1]), true
	}
	var out string
	if json.Unmarshal(s, &out) != nil {
		return "", false
	}
	return out, true
}

// Span is a JSON value as a slice of the document being decoded (no copy):
// valid while that document is.
type Span []byte

// UnmarshalJSON keeps b itself.
func (s *Span) UnmarshalJSON(b []byte) error {
	*s = b
	return nil
}

// JoinKey is the path of key below path: path.key, or path[key] for a key
// that is not a plain name (e.g. nvidia.com/gpu); a long key is shortened.
func JoinKey(path, key string) string {
	if len(key) > 64 {
		key = key[:64] + "…"
	}
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + key + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	containsCache   sync.Map // reflect.Type → bool
)

// Contains says whether a value of type t, decoded from JSON, may hold a
// resource.Quantity that CheckTree can reach: t is one, or a struct, slice,
// array, map or pointer holding one, not through a type with a JSON decoder
// of its own.
func Contains(t reflect.Type) bool {
	if v, ok := containsCache.Load(t); ok {
		return v.(bool)
	}
	v := contains(t, map[reflect.Type]bool{})
	containsCache.Store(t, v)
	return v
}

func contains(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if t == quantityType {
		return true
	}
	if visiting[t] {
		return false // a cycle: what it holds is found on its first visit
	}
	visiting[t] = true
	if t.Kind() != reflect.Pointer && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return contains(t.Elem(), visiting)
	case reflect.Map:
		return contains(t.Elem(), visiting)
	case reflect.Struct:
		for _, f := range JSONFields(t) {
			if contains(f.Type, visiting) {
				return true
			}
		}
	}
	return false
}

// Field is one JSON key of a struct type: its name, the index path of the Go
// field (through embedded structs) and the field's type.
type Field struct {
	Name  string
	Index []int
	Type  reflect.Type
}

type fieldSet struct {
	list   []Field
	byName map[string]*Field
	byFold map[string]*Field
}

var fieldsCache sync.Map // reflect.Type → *fieldSet

// JSONFields are the JSON keys of struct type t as encoding/json maps them:
// exported fields by their tag's name (or the Go name), "-" left out, the
// fields of embedded structs without a name promoted, a shallower field
// hiding a deeper one of the same name.
func JSONFields(t reflect.Type) []Field { return fieldsOf(t).list }

// FieldOf is the field of struct type t that JSON key k decodes into (the
// one of that exact name, else one whose name differs only in letter case),
// or nil.
func FieldOf(t reflect.Type, k string) *Field {
	fs := fieldsOf(t)
	if f := fs.byName[k]; f != nil {
		return f
	}
	return fs.byFold[strings.ToLower(k)]
}

func fieldsOf(t reflect.Type) *fieldSet {
	if v, ok := fieldsCache.Load(t); ok {
		return v.(*fieldSet)
	}
	type found struct {
		Field
		depth int
	}
	var all []found
	var collect func(t reflect.Type, index []int, depth int)
	collect = func(t reflect.Type, index []int, depth int) {
		if depth > 8 {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), index...), i)
			ft := sf.Type
			if sf.Anonymous {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if name == "" && et.Kind() == reflect.Struct {
					collect(et, idx, depth+1)
					continue
				}
				if !sf.IsExported() {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			all = append(all, found{Field{Name: name, Index: idx, Type: ft}, depth})
		}
	}
	collect(t, nil, 0)
	// The shallowest field of a name wins; two at the same depth hide each other.
	best := map[string]int{}
	count := map[string]int{}
	for _, f := range all {
		d, ok := best[f.Name]
		switch {
		case !ok || f.depth < d:
			best[f.Name], count[f.Name] = f.depth, 1
		case f.depth == d:
			count[f.Name]++
		}
	}
	fs := &fieldSet{byName: map[string]*Field{}, byFold: map[string]*Field{}}
	for _, f := range all {
		if f.depth == best[f.Name] && count[f.Name] == 1 {
			fs.list = append(fs.list, f.Field)
		}
	}
	for i := range fs.list {
		f := &fs.list[i]
		fs.byName[f.Name] = f
		if _, dup := fs.byFold[strings.ToLower(f.Name)]; !dup {
			fs.byFold[strings.ToLower(f.Name)] = f
		}
	}
	v, _ := fieldsCache.LoadOrStore(t, fs)
	return v.(*fieldSet)
}
