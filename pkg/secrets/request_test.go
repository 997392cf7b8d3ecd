package secrets

import (
	"reflect"
	"strings"
	"testing"
)

// Annotation values as Flyte's executor writes them (test vectors of its wire
// format): the two must read each other's pods.
func TestAnnotationsMatchFlyteEncoding(t *testing.T) {
	cases := []struct {
		name    string
		req     Request
		encoded string
	}{
		{"characters that need escaping", Request{Group: `;':/\`}, "m4zg54lqhiqceozhhixvyxbcbi"},
		{"key without group", Request{Key: "my_key"}, "nnsxsoraejwxsx2lmv3secq"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Annotations([]Request{tc.req})
			if want := map[string]string{"flyte.secrets/s0": tc.encoded}; !reflect.DeepEqual(got, want) {
				t.Errorf("Annotations = %v, want %v", got, want)
			}
			back, err := FromAnnotations(map[string]string{"flyte.secrets/s0": tc.encoded})
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != 1 || back[0] != tc.req {
				t.Errorf("FromAnnotations = %+v, want %+v", back, tc.req)
			}
		})
	}
}

func TestRequestsRoundTrip(t *testing.T) {
	reqs := []Request{
		{Group: "db", Key: "password", Mount: MountEnvVar, EnvVar: "DB_PASSWORD"},
		{Group: "tls", GroupVersion: "v3", Key: "ca.crt", Mount: MountFile},
		{Key: "token"},
		{Group: "odd \"group\"\n\x01", Key: "ключ", Mount: MountFile},
	}
	// More than ten requests: s10 must sort after s9.
	for i := 0; i < 8; i++ {
		reqs = append(reqs, Request{Group: "g", Key: strings.Repeat("k", i+1)})
	}
	ann := Annotations(reqs)
	ann["other/annotation"] = "kept out"
	got, err := FromAnnotations(ann)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, reqs) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, reqs)
	}
}

func TestDecodeTextAcceptsAnyTextForm(t *testing.T) {
	want := Request{Group: "g", Key: "k", Mount: MountFile, EnvVar: "E"}
	for _, text := range []string{
		"group: \"g\"\nkey: \"k\"\nmount_requirement: FILE\nenv_var: \"E\"\n",
		`env_var:"E" key:'k' group:"g" mount_requirement:2`,
		"# a comment\ngroup: \"g\" key: \"k\" mount_requirement: FILE env_var: \"E\" future_field: 7",
	} {
		got, err := DecodeText(text)
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		if got != want {
			t.Errorf("%q: got %+v, want %+v", text, got, want)
		}
	}
}

func TestFromAnnotationsErrorsNameTheAnnotation(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"not base32", "flyte.secrets/s0", "!!!", "annotation flyte.secrets/s0: not base32"},
		{"not a Secret", "flyte.secrets/s1", encoding.EncodeToString([]byte("group: 5 5")), "annotation flyte.secrets/s1: not a flyteidl2.core.Secret"},
		{"unknown mount", "flyte.secrets/s2", encoding.EncodeToString([]byte("mount_requirement: 9")), "annotation flyte.secrets/s2: not a flyteidl2.core.Secret"},
		{"bad index", "flyte.secrets/sx", "aa", "annotation flyte.secrets/sx: the suffix"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromAnnotations(map[string]string{tc.key: tc.value})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
