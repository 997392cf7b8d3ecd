package quantity_test

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/taskaction/executor/pkg/quantity"
)

// hostile are quantities resource.ParseQuantity would take forever (or very
// long) over, or that are not quantities at all.
var hostile = []string{
	"1e2147483648", "1e-2147483648", "1e2147483647", "-1e2147483648", "1E100000000", "1e-100000000",
	"1e100", "1.5e-100", "1e0000000000000000000000000000000000005",
	"lots", "", " ", "1e", "1Ki5", "1.5.5", "--1", "1ki", "0x10", "1_000", "\u00bd",
	strings.Repeat("9", quantity.MaxLength+1), strings.Repeat("9", 1<<20), "0." + strings.Repeat("0", 100000) + "1",
}

func TestCheckRefusesHostileQuantities(t *testing.T) {
	for _, s := range hostile {
		if err := quantity.Check(s); err == nil {
			t.Errorf("Check(%s) = nil, want an error", quantity.Show(s))
		}
		if _, err := quantity.Parse(s); err == nil {
			t.Errorf("Parse(%s) = nil error", quantity.Show(s))
		}
	}
}

func TestCheckNamesTheFault(t *testing.T) {
	for s, want := range map[string]string{
		"1e2147483648":                  "exponent",
		"1e100":                         "exponent",
		"lots":                          "not a Kubernetes quantity",
		strings.Repeat("9", 65):         "65 characters long",
		strings.Repeat("1", 100) + "e5": "102 characters long",
	} {
		err := quantity.Check(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want it to say %q", quantity.Show(s), err, want)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("Check(%s): message of %d bytes", quantity.Show(s), len(err.Error()))
		}
	}
}

// Every quantity Kubernetes writes, and the edges of the bounds, parse as
// the library parses them.
func TestParseAgreesWithTheLibrary(t *testing.T) {
	for _, s := range []string{
		"0", "1", "-1", "+1", "500m", "1.5", ".5", "1.", "2Gi", "1Ki", "1Ei", "100M", "1n", "3u", "1e3", "1E3", "1e-3", "1e+3",
		"1e99", "1e-99", "9223372036854775807", "9223372036854775808", "1.5Gi", "0.000000001",
		strings.Repeat("9", quantity.MaxLength), "1" + strings.Repeat("0", quantity.MaxLength-4) + "e99",
	} {
		got, err := quantity.Parse(s)
		if err != nil {
			t.Errorf("Parse(%q): %v", s, err)
			continue
		}
		want := resource.MustParse(s)
		if got.Cmp(want) != 0 || got.String() != want.String() {
			t.Errorf("Parse(%q) = %s, the library %s", s, got.String(), want.String())
		}
	}
}

// The pattern the CRD carries is the one Check applies, and it is
// Kubernetes' own with the exponent bounded.
func TestPatternIsKubernetesWithABoundedExponent(t *testing.T) {
	k8s := regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)
	re := regexp.MustCompile(quantity.Pattern)
	for _, s := range append(hostile, "1", "1e99", "1e100", "5Gi", "1e2.5", "+.5e-9") {
		if len(s) > quantity.MaxLength {
			continue // the CRD's maxLength, not the pattern, refuses these
		}
		if re.MatchString(s) && !k8s.MatchString(s) {
			t.Errorf("%s matches the bounded pattern and not Kubernetes'", quantity.Show(s))
		}
		if re.MatchString(s) != (quantity.Check(s) == nil) {
			t.Errorf("%s: pattern %v, Check %v", quantity.Show(s), re.MatchString(s), quantity.Check(s))
		}
	}
}

func TestCheckJSON(t *testing.T) {
	for raw, ok := range map[string]bool{
		`"1"`: true, `1`: true, `"500m"`: true, `null`: true, `1.5`: true, `1e+23`: true, `" 2Gi "`: true,
		`"1e2147483648"`: false, `1e2147483648`: false, `1e+300`: false, `"lots"`: false, `true`: false,
		`{}`: false, `[]`: false, `"\u0031"`: false, `""`: false, `"` + strings.Repeat("9", 1000) + `"`: false,
	} {
		err := quantity.CheckJSON([]byte(raw))
		if (err == nil) != ok {
			t.Errorf("CheckJSON(%s) = %v, want ok=%v", quantity.Show(raw), err, ok)
		}
		if err == nil && raw != "null" {
			// What passes, the library decodes.
			var q resource.Quantity
			if err := q.UnmarshalJSON([]byte(raw)); err != nil {
				t.Errorf("CheckJSON(%s) passed, Quantity.UnmarshalJSON: %v", raw, err)
			}
		}
	}
}

// CheckTree finds every quantity a pod spec holds, wherever it is, and
// names its path; it ignores values the decoder will refuse anyway.
func TestCheckTreeFindsEveryQuantityOfAPodSpec(t *testing.T) {
	doc := `{
	  "containers": [
	    {"name": "a", "resources": {"limits": {"cpu": "1e2147483648", "memory": "1Gi"}, "requests": {"nvidia.com/gpu": "lots"}}},
	    {"name": "b", "env": [{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1e-2147483648"}}}]}
	  ],
	  "initContainers": [{"name": "i", "Resources": {"Limits": {"cpu": 1e300}}}],
	  "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1E100000000"}},
	              {"name": "w", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "9e99999"}}}}}}],
	  "overhead": {"cpu": "` + strings.Repeat("1", 200) + `"},
	  "resources": {"limits": {"memory": "1e100"}},
	  "nodeSelector": {"cpu": "1e2147483648"},
	  "hostname": 5,
	  "tolerations": "not a list"
	}`
	errs := quantity.CheckTree([]byte(doc), reflect.TypeFor[corev1.PodSpec](), "spec", 100)
	var got []string
	for _, e := range errs {
		got = append(got, e.Path)
	}
	want := []string{ // in the document's order
		"spec.containers[0].resources.limits.cpu",
		"spec.containers[0].resources.requests[nvidia.com/gpu]",
		"spec.containers[1].env[0].valueFrom.resourceFieldRef.divisor",
		"spec.initContainers[0].Resources.Limits.cpu",
		"spec.volumes[0].emptyDir.sizeLimit",
		"spec.volumes[1].ephemeral.volumeClaimTemplate.spec.resources.requests.storage",
		"spec.overhead.cpu",
		"spec.resources.limits.memory",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("paths:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if errs := quantity.CheckTree([]byte(doc), reflect.TypeFor[corev1.PodSpec](), "spec", 2); len(errs) != 2 {
		t.Errorf("limit 2: %d errors", len(errs))
	}
	// Keys written with escapes are keys all the same.
	escaped := `{"containers":[{"name":"a","resour\u0063es":{"limits":{"cpu":"1e2147483648"}}}]}`
	if errs := quantity.CheckTree([]byte(escaped), reflect.TypeFor[corev1.PodSpec](), "", 10); len(errs) != 1 {
		t.Errorf("escaped key: %v", errs)
	}
}

// What is not JSON, or not the shape the type expects, is the decoder's to
// refuse: CheckTree neither fails on it nor reports it.
func TestCheckTreeLeavesMalformedDocumentsToTheDecoder(t *testing.T) {
	for _, doc := range []string{``, `{`, `{"containers":`, `{"containers":[{"resources":{"limits":{"cpu":"1"`, `[]`, `"x"`, `{"containers":{"name":"x"}}`,
		`{"containers":[1,"x",null,{"resources":null}]}`, `{"a" "b"}`, `{"containers":[{"resources":{"limits":{"cpu":1}}}]}`} {
		if errs := quantity.CheckTree([]byte(doc), reflect.TypeFor[corev1.PodSpec](), "", 10); len(errs) != 0 {
			t.Errorf("%s: %v", doc, errs)
		}
	}
}

func TestContains(t *testing.T) {
	for typ, want := range map[reflect.Type]bool{
		reflect.TypeFor[corev1.PodSpec]():           true,
		reflect.TypeFor[*resource.Quantity]():       true,
		reflect.TypeFor[corev1.ResourceList]():      true,
		reflect.TypeFor[corev1.EnvVar]():            true,
		reflect.TypeFor[corev1.Toleration]():        false,
		reflect.TypeFor[corev1.SecurityContext]():   false,
		reflect.TypeFor[map[string]string]():        false,
		reflect.TypeFor[struct{ Next *struct{} }](): false,
	} {
		if got := quantity.Contains(typ); got != want {
			t.Errorf("Contains(%v) = %v, want %v", typ, got, want)
		}
	}
}
