package ray

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestJobName(t *testing.T) {
	long := "rk7x2m9q4t-train-model-with-a-long-descriptive-name"
	cases := []struct {
		name    string
		ta      string
		attempt int32
		want    string
	}{
		{name: "Flyte's name as it is", ta: "rk7x2m9q4t-a0", attempt: 1, want: "rk7x2m9q4t-a0-0"},
		{name: "retry number, 0-based", ta: "rk7x2m9q4t-a0", attempt: 3, want: "rk7x2m9q4t-a0-2"},
		{name: "attempt below 1 counts as 1", ta: "rk7x2m9q4t-a0", attempt: 0, want: "rk7x2m9q4t-a0-0"},
		{name: "exactly 47", ta: strings.Repeat("a", 45), attempt: 1, want: strings.Repeat("a", 45) + "-0"},
		{name: "too long: shortened, hashed", ta: long, attempt: 1, want: "rk7x2m9q4t-train-model-with-a-long-d-fc67d31c-0"},
		{name: "too long, retry", ta: long, attempt: 2, want: "rk7x2m9q4t-train-model-with-a-long-d-fc67d31c-1"},
		{name: "starts with a digit", ta: "7run-a0", attempt: 1, want: "r7run-a0-01c9de4f-0"},
		{name: "upper case and dots", ta: "Run.A0", attempt: 1, want: "run-a0-ae7acb05-0"},
		{name: "nothing usable", ta: "...", attempt: 1, want: "r-0ac31c19-0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := JobName(tc.ta, tc.attempt)
			if got != tc.want {
				t.Errorf("JobName(%q, %d) = %q, want %q", tc.ta, tc.attempt, got, tc.want)
			}
			if len(got) > MaxJobNameLength {
				t.Errorf("%q is longer than KubeRay's %d", got, MaxJobNameLength)
			}
			if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
				t.Errorf("%q is not a DNS-1035 label: %v", got, errs)
			}
		})
	}
}

// TestJobNameDistinct: TaskActions whose names shorten alike keep distinct
// RayJobs, and every attempt of one has its own.
func TestJobNameDistinct(t *testing.T) {
	prefix := strings.Repeat("x", 50)
	seen := map[string]string{}
	for _, ta := range []string{prefix + "-a", prefix + "-b", prefix + "_a", strings.ToUpper(prefix) + "-a"} {
		for attempt := int32(1); attempt <= 3; attempt++ {
			n := JobName(ta, attempt)
			if other, ok := seen[n]; ok {
				t.Errorf("%s attempt %d and %s share %q", ta, attempt, other, n)
			}
			seen[n] = ta
		}
	}
}
