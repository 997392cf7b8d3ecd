// Command crdbounds completes the TaskAction CRD that controller-gen wrote
// with the bounds controller-gen's markers cannot put on the types of other
// packages: every value whose Go type is a resource.Quantity (the typed
// container's requests and limits, an env var's resourceFieldRef divisor)
// gets pkg/quantity's Pattern (Kubernetes' own with the exponent at most two
// digits) and MaxLength: exactly what the executor's decoder takes (the API
// server holds the integer form to int64 by itself). It walks the schema
// beside the Go type by reflection, so that a quantity added anywhere in the
// type is bounded too. `make manifests` runs it after controller-gen; a
// second run changes nothing.
//
// Usage: go run ./api/v1/crdbounds config/crd/bases/flyte.org_taskactions.yaml
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/quantity"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds <taskactions CRD YAML>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdbounds:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, n, err := Bound(in)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no quantity found in the schema: the walk lost its way")
	}
	if bytes.Equal(in, out) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// Bound returns the CRD in with every quantity of every version's schema
// bounded, and how many quantities it bounded. The YAML is written as
// controller-gen writes it (keys sorted, integers exact).
func Bound(in []byte) ([]byte, int, error) {
	js, err := yaml.YAMLToJSON(in)
	if err != nil {
		return nil, 0, err
	}
	var crd map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&crd); err != nil {
		return nil, 0, err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	n := 0
	for _, v := range versions {
		schema, _ := v.(map[string]any)["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		if root == nil {
			return nil, 0, errors.New("a version without openAPIV3Schema")
		}
		walk(root, reflect.TypeFor[flytev1.TaskAction](), &n)
	}
	y, err := yaml.Marshal(crd)
	if err != nil {
		return nil, 0, err
	}
	return append([]byte("---\n"), y...), n, nil
}

var quantityType = reflect.TypeFor[resource.Quantity]()

// walk bounds the quantities of schema s, the schema of Go type t.
func walk(s map[string]any, t reflect.Type, n *int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == quantityType {
		// The integer form needs no bound of its own: the API server holds
		// an integer to int64, whose every value the decoder takes.
		s["pattern"] = quantity.Pattern
		s["maxLength"] = json.Number(fmt.Sprint(quantity.MaxLength))
		*n++
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		props, _ := s["properties"].(map[string]any)
		for _, f := range quantity.JSONFields(t) {
			if p, ok := props[f.Name].(map[string]any); ok {
				walk(p, f.Type, n)
			}
		}
	case reflect.Slice, reflect.Array:
		if items, ok := s["items"].(map[string]any); ok {
			walk(items, t.Elem(), n)
		}
	case reflect.Map:
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			walk(ap, t.Elem(), n)
		}
	}
}
