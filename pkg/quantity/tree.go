package quantity

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"
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
// or in another letter case), so its work is at most the size of raw for
// each level of t. A value of the wrong JSON kind is left to the decoder,
// which reports it.
func CheckTree(raw []byte, t reflect.Type, path string, limit int) []*PathError {
	w := walker{limit: limit}
	w.walk(raw, t, path, 0)
	return w.errs
}

type walker struct {
	limit int
	errs  []*PathError
}

func (w *walker) full() bool { return len(w.errs) >= w.limit }

func (w *walker) walk(raw []byte, t reflect.Type, path string, depth int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if w.full() || !Contains(t) {
		return
	}
	if t == quantityType {
		if err := CheckJSON(raw); err != nil {
			w.errs = append(w.errs, &PathError{Path: path, Err: err})
		}
		return
	}
	if depth >= MaxDepth {
		w.errs = append(w.errs, &PathError{Path: path, Err: errTooDeep})
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]Span
		if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj) != nil {
			return
		}
		for _, k := range sortedKeys(obj) {
			if f := FieldOf(t, k); f != nil {
				w.walk(obj[k], f.Type, JoinKey(path, k), depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		var items []Span
		if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &items) != nil {
			return
		}
		for i, item := range items {
			w.walk(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", depth+1)
		}
	case reflect.Map:
		var obj map[string]Span
		if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj) != nil {
			return
		}
		for _, k := range sortedKeys(obj) {
			w.walk(obj[k], t.Elem(), JoinKey(path, k), depth+1)
		}
	}
}

type depthError struct{}

func (depthError) Error() string {
	return "nested more than " + strconv.Itoa(MaxDepth) + " levels deep"
}

var errTooDeep error = depthError{}

// Span is a JSON value as a slice of the document being decoded (no copy):
// valid while that document is.
type Span []byte

// UnmarshalJSON keeps b itself.
func (s *Span) UnmarshalJSON(b []byte) error {
	*s = b
	return nil
}

func sortedKeys(m map[string]Span) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
