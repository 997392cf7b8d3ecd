package ray

import (
	"encoding/json"
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// overlayPodSpec lays a group's pod spec (HeadGroupSpec.k8s_pod,
// WorkerGroupSpec.k8s_pod) over the pod spec built from the task, by the
// rules of Flyte's merge: a value the overlay sets replaces the base's, lists
// are appended, maps merged key by key, structs and pointed-to structs field
// by field. Containers and init containers are merged with the base's of the
// same name; an overlay container the base does not have is dropped, as
// Flyte drops it. Neither argument is modified.
func overlayPodSpec(base *corev1.PodSpec, overlay *corev1.PodSpec) *corev1.PodSpec {
	out := base.DeepCopy()
	over := overlay.DeepCopy()
	containers, inits := over.Containers, over.InitContainers
	over.Containers, over.InitContainers = nil, nil
	merge(reflect.ValueOf(out).Elem(), reflect.ValueOf(over).Elem())
	mergeByName(out.Containers, containers)
	mergeByName(out.InitContainers, inits)
	return out
}

func mergeByName(base, overlay []corev1.Container) {
	for i := range base {
		for j := range overlay {
			if overlay[j].Name == base[i].Name {
				merge(reflect.ValueOf(&base[i]).Elem(), reflect.ValueOf(&overlay[j]).Elem())
			}
		}
	}
}

// merge lays src over dst (both settable values of one type, src owned by
// the caller). A struct that encodes itself (a Quantity, a Time, an
// IntOrString) or has no exported field is one value, replaced when src's is
// not zero (Flyte's merge would mix a Quantity's fields).
func merge(dst, src reflect.Value) {
	switch dst.Kind() {
	case reflect.Struct:
		if opaque(dst.Type()) {
			if !src.IsZero() {
				dst.Set(src)
			}
			return
		}
		for i := 0; i < dst.NumField(); i++ {
			if dst.Type().Field(i).IsExported() {
				merge(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Pointer:
		switch {
		case src.IsNil():
		case dst.IsNil():
			dst.Set(src)
		case dst.Elem().Kind() == reflect.Struct:
			merge(dst.Elem(), src.Elem())
		case !src.Elem().IsZero():
			dst.Set(src)
		}
	case reflect.Slice:
		if src.Len() > 0 {
			dst.Set(reflect.AppendSlice(dst, src))
		}
	case reflect.Map:
		if src.Len() == 0 {
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeMapWithSize(dst.Type(), src.Len()))
		}
		for it := src.MapRange(); it.Next(); {
			v := it.Value()
			if cur := dst.MapIndex(it.Key()); cur.IsValid() && v.Kind() == reflect.Slice {
				// A list under a key is appended too.
				v = reflect.AppendSlice(cur, v)
			}
			dst.SetMapIndex(it.Key(), v)
		}
	default:
		if !src.IsZero() {
			dst.Set(src)
		}
	}
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

func opaque(t reflect.Type) bool {
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return true
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			return false
		}
	}
	return true
}
