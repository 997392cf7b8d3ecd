package container

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPodName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct {
		name    string
		in      string
		attempt int32
		want    string // exact, or "" to check only the properties
		prefix  string
		suffix  string
	}{
		{name: "short", in: "my-action", attempt: 1, want: "my-action-0"},
		{name: "retry", in: "my-action", attempt: 3, want: "my-action-2"},
		{name: "attempt 0 counts as 1", in: "x", attempt: 0, want: "x-0"},
		{name: "exactly 63", in: strings.Repeat("b", 61), attempt: 1, want: strings.Repeat("b", 61) + "-0"},
		{name: "too long", in: long, attempt: 1, prefix: "aaaa", suffix: "-" + shortHash(long) + "-0"},
		{name: "too long keeps retry suffix", in: long, attempt: 12, suffix: "-" + shortHash(long) + "-11"},
		{name: "dots and upper case", in: "My.Action", attempt: 1, want: "my-action-" + shortHash("My.Action") + "-0"},
		{name: "only bad chars", in: "...", attempt: 1, want: shortHash("...") + "-0"},
		{name: "leading dash after sanitising", in: ".a", attempt: 2, want: "a-" + shortHash(".a") + "-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PodName(tc.in, tc.attempt)
			if tc.want != "" && got != tc.want {
				t.Errorf("PodName(%q, %d) = %q, want %q", tc.in, tc.attempt, got, tc.want)
			}
			if !strings.HasPrefix(got, tc.prefix) || !strings.HasSuffix(got, tc.suffix) {
				t.Errorf("PodName(%q, %d) = %q, want prefix %q suffix %q", tc.in, tc.attempt, got, tc.prefix, tc.suffix)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("PodName(%q, %d) = %q is not a DNS-1123 label: %v", tc.in, tc.attempt, got, errs)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("PodName(%q, %d) = %q is not a label value: %v", tc.in, tc.attempt, got, errs)
			}
			if again := PodName(tc.in, tc.attempt); again != got {
				t.Errorf("not stable: %q then %q", got, again)
			}
		})
	}
	// Names that sanitise alike must not collide.
	if PodName("a.b", 1) == PodName("a-b", 1) {
		t.Errorf("a.b and a-b collide")
	}
	if PodName(long, 1) == PodName(long+"x", 1) {
		t.Errorf("long names differing only past the cut collide")
	}
}

// Flyte's label rule: characters outside [A-Za-z0-9._-] (a rune each)
// become '-', at most 63 characters, a bad first or last character becomes 'x'.
func TestLabelValue(t *testing.T) {
	cases := []struct{ in, want string }{
		{"proj", "proj"},
		{"my.task_v1-x", "my.task_v1-x"},
		{"a b/c", "a-b-c"},
		{"-lead", "xlead"},
		{"trail.", "trailx"},
		{"___", "x_x"},
		{"-", "x"},
		{"", ""},
		{"ünï", "xnx"},
		{strings.Repeat("x", 62) + "-y", strings.Repeat("x", 62) + "x"},
		{strings.Repeat("z", 80), strings.Repeat("z", 63)},
	}
	for _, tc := range cases {
		got := LabelValue(tc.in)
		if got != tc.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q invalid: %v", tc.in, got, errs)
		}
	}
}

// Flyte's {{.PerRetryUniqueKey}}: a leading run that cannot start an
// identifier becomes "a", every other run outside [A-Za-z0-9_] one "_".
func TestPerRetryUniqueKey(t *testing.T) {
	cases := []struct{ in, want string }{
		{"my-action-0", "my_action_0"},
		{"r1-a0-2", "r1_a0_2"},
		{"0abc-1", "aabc_1"},
		{"12-x", "ax"},
		{"a..b--c", "a_b_c"},
		{"_ok", "_ok"},
		{"", ""},
	}
	for _, tc := range cases {
		if got := perRetryUniqueKey(tc.in); got != tc.want {
			t.Errorf("perRetryUniqueKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
