package layout

import "testing"

func TestJoin(t *testing.T) {
	for _, tc := range []struct{ name, base, elem, want string }{
		{"no trailing slash", "s3://b/run/a0/1", OutputsFile, "s3://b/run/a0/1/outputs.pb"},
		{"trailing slash", "s3://b/run/a0/1/", ErrorFile, "s3://b/run/a0/1/error.pb"},
		{"bucket only", "gs://b", InputsFile, "gs://b/inputs.pb"},
		{"an element with slashes", "s3://b/x", "/_flytecheckpoints/", "s3://b/x/_flytecheckpoints"},
		{"an escaped path", "s3://b/my%20run/a/1", OutputsFile, "s3://b/my%20run/a/1/outputs.pb"},
		{"a file URI", "file:///d/r/out", ErrorFile, "file:///d/r/out/error.pb"},
		{"empty", "", OutputsFile, ""},
		{"not a URL", "s3://b/%zz", OutputsFile, ""},
	} {
		if got := Join(tc.base, tc.elem); got != tc.want {
			t.Errorf("%s: Join(%q, %q) = %q, want %q", tc.name, tc.base, tc.elem, got, tc.want)
		}
	}
}

func TestInputPaths(t *testing.T) {
	for _, tc := range []struct{ uri, prefix, file string }{
		{"s3://b/run/a0", "s3://b/run/a0", "s3://b/run/a0/inputs.pb"},                       // a root action's folder
		{"s3://b/run/a0/", "s3://b/run/a0/", "s3://b/run/a0/inputs.pb"},                     // a folder with a slash
		{"s3://b/run/n1/inputs.pb", "s3://b/run/n1", "s3://b/run/n1/inputs.pb"},             // a child's file
		{"file:///d/r/x/inputs.pb/", "file:///d/r/x/inputs.pb/", "file:///d/r/x/inputs.pb"}, // the file with a slash
		{"s3://b/run/n1/other.pb", "s3://b/run/n1/other.pb", "s3://b/run/n1/other.pb/inputs.pb"},
		{"", "", ""},
	} {
		if got := InputPrefix(tc.uri); got != tc.prefix {
			t.Errorf("InputPrefix(%q) = %q, want %q", tc.uri, got, tc.prefix)
		}
		if got := InputURI(tc.uri); got != tc.file {
			t.Errorf("InputURI(%q) = %q, want %q", tc.uri, got, tc.file)
		}
	}
}
