package v1_test

import (
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/quantity"
)

// schemaOf is the generated CRD's schema of the TaskAction.
func schemaOf(t *testing.T) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "flyte.org_taskactions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions", len(crd.Spec.Versions))
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

type schemaWalk struct {
	t          *testing.T
	integers   []string
	quantities []string
}

var (
	apiPkg       = reflect.TypeFor[flytev1.TaskAction]().PkgPath()
	quantityType = reflect.TypeFor[resource.Quantity]()
)

// walk follows Go type typ and its schema s together; owned says the field
// is declared in this API's own types.
func (w *schemaWalk) walk(s *apiextensionsv1.JSONSchemaProps, typ reflect.Type, path string, owned bool) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == quantityType {
		w.quantities = append(w.quantities, path)
		if s.Pattern != quantity.Pattern || s.MaxLength == nil || *s.MaxLength != quantity.MaxLength {
			w.t.Errorf("%s: a quantity with pattern %q, maxLength %v; want pkg/quantity's bounded pattern and maxLength %d", path, s.Pattern, s.MaxLength, quantity.MaxLength)
		}
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		if len(s.Properties) == 0 {
			return // a string form (metav1.Time), or an object the schema leaves open
		}
		w.fields(s, typ, path)
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 {
			return // bytes: a base64 string
		}
		if s.Items == nil || s.Items.Schema == nil {
			w.t.Errorf("%s: a list without an item schema", path)
			return
		}
		w.walk(s.Items.Schema, typ.Elem(), path+"[]", owned)
	case reflect.Map:
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			w.t.Errorf("%s: a map without a value schema", path)
			return
		}
		w.walk(s.AdditionalProperties.Schema, typ.Elem(), path+"[*]", owned)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.integers = append(w.integers, path)
		w.integer(s, typ, path, owned)
	}
}

func (w *schemaWalk) fields(s *apiextensionsv1.JSONSchemaProps, typ reflect.Type, path string) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			w.fields(s, f.Type, path) // inline
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := strings.TrimPrefix(path+"."+name, ".")
		prop, ok := s.Properties[name]
		if !ok {
			if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
				continue // declared for the outline only
			}
			w.t.Errorf("%s: no schema for this field", p)
			continue
		}
		w.walk(&prop, f.Type, p, typ.PkgPath() == apiPkg)
	}
}

// integer checks that the values the schema admits for an integer field
// (its format's range and its minimum and maximum) are within its Go type's
// range, and for a status field of this API's own types exactly that range:
// they are Flyte's types, and Flyte's actions service writes the status.
func (w *schemaWalk) integer(s *apiextensionsv1.JSONSchemaProps, typ reflect.Type, path string, owned bool) {
	goMin, goMax := goRange(typ.Kind())
	var lo, hi *big.Int
	switch s.Format {
	case "int32":
		lo, hi = big.NewInt(math.MinInt32), big.NewInt(math.MaxInt32)
	case "int64":
		lo, hi = big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	case "":
	default:
		w.t.Errorf("%s: format %q, which the API server does not hold integers to", path, s.Format)
	}
	if s.Minimum != nil {
		m := floatInt(*s.Minimum, s.ExclusiveMinimum, +1)
		if lo == nil || m.Cmp(lo) > 0 {
			lo = m
		}
	}
	if s.Maximum != nil {
		m := floatInt(*s.Maximum, s.ExclusiveMaximum, -1)
		if hi == nil || m.Cmp(hi) < 0 {
			hi = m
		}
		// The API server checks the bound itself against the format's range.
		if s.Format == "int32" && (*s.Maximum > math.MaxInt32 || *s.Maximum < math.MinInt32) {
			w.t.Errorf("%s: maximum %v outside format int32: the API server refuses every value", path, *s.Maximum)
		}
	}
	switch {
	case lo == nil || hi == nil:
		w.t.Errorf("%s (%s): the schema admits integers of any size (minimum %v, maximum %v, format %q)", path, typ.Kind(), s.Minimum, s.Maximum, s.Format)
	case lo.Cmp(goMin) < 0 || hi.Cmp(goMax) > 0:
		w.t.Errorf("%s (%s): the schema admits [%v, %v], beyond the Go type's [%v, %v]", path, typ.Kind(), lo, hi, goMin, goMax)
	case owned && strings.HasPrefix(path, "status.") && (lo.Cmp(goMin) != 0 || hi.Cmp(goMax) != 0):
		w.t.Errorf("%s (%s): the schema admits [%v, %v], not all of the Go type's (Flyte's) [%v, %v]", path, typ.Kind(), lo, hi, goMin, goMax)
	}
}

// floatInt is the integer bound a float bound makes: the bound itself, or
// the next integer inward when it is exclusive or not an integer.
func floatInt(f float64, exclusive bool, inward int64) *big.Int {
	bf := new(big.Float).SetFloat64(f)
	i, acc := bf.Int(nil)
	if exclusive && acc == big.Exact || acc != big.Exact && (inward > 0) == (acc == big.Below) {
		i.Add(i, big.NewInt(inward))
	}
	return i
}

func goRange(k reflect.Kind) (*big.Int, *big.Int) {
	u := func(bits uint) *big.Int {
		return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), bits), big.NewInt(1))
	}
	s := func(bits uint) (*big.Int, *big.Int) {
		return new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), bits-1)), u(bits - 1)
	}
	switch k {
	case reflect.Int8:
		return s(8)
	case reflect.Int16:
		return s(16)
	case reflect.Int32:
		return s(32)
	case reflect.Int64, reflect.Int:
		return s(64)
	case reflect.Uint8:
		return big.NewInt(0), u(8)
	case reflect.Uint16:
		return big.NewInt(0), u(16)
	case reflect.Uint32:
		return big.NewInt(0), u(32)
	}
	return big.NewInt(0), u(64)
}

// The generated CRD admits no integer its Go field cannot hold, and every
// quantity has the bounded pattern: what the API server stores, the
// executor decodes. The walk follows the Go types, so a field added later
// is checked too.
func TestSchemaIsAsStrictAsTheGoTypes(t *testing.T) {
	w := &schemaWalk{t: t}
	w.walk(schemaOf(t), reflect.TypeFor[flytev1.TaskAction](), "", true)
	t.Logf("integers: %s", strings.Join(w.integers, ", "))
	t.Logf("quantities: %s", strings.Join(w.quantities, ", "))
	for _, want := range []string{"spec.template.retries", "status.pluginStateVersion", "status.pluginPhaseVersion", "status.attempts",
		"status.systemFailures", "status.cacheStatus", "status.conditions[].observedGeneration"} {
		if !strings.Contains(","+strings.Join(w.integers, ",")+",", ","+want+",") {
			t.Errorf("the walk did not reach integer %s", want)
		}
	}
	if len(w.quantities) < 3 {
		t.Errorf("the walk reached %d quantities, want the typed container's requests, limits and env divisor", len(w.quantities))
	}
}

// floatInt rounds inward.
func TestFloatInt(t *testing.T) {
	for _, tc := range []struct {
		f         float64
		exclusive bool
		inward    int64
		want      string
	}{
		{255, false, -1, "255"}, {255, true, -1, "254"}, {0, true, +1, "1"}, {2.5, false, -1, "2"}, {2.5, false, +1, "3"},
		{-2.5, false, +1, "-2"}, {-3, true, +1, "-2"},
	} {
		if got := floatInt(tc.f, tc.exclusive, tc.inward).String(); got != tc.want {
			t.Errorf("floatInt(%v, %v, %d) = %s, want %s", tc.f, tc.exclusive, tc.inward, got, tc.want)
		}
	}
}
