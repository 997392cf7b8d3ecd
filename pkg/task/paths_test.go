package task

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func pathTA(ns, name, base, action string) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       flytev1.TaskActionSpec{RunOutputBase: base, ActionName: action},
	}
}

// The shards were computed independently (FNV-1a 32 of "<ns>/<name>" mod
// 1296 over a-z0-9, first character outer), as Flyte's executor computes them.
func TestShard(t *testing.T) {
	for _, tc := range []struct{ ns, name, want string }{
		{"flyte", "r1-a0", "xt"},
		{"default", "hello", "v3"},
		{"ns", "run-abc", "23"},
		{"flyte", "rabcd-a0", "sg"},
	} {
		if got := Shard(tc.ns, tc.name); got != tc.want {
			t.Errorf("Shard(%q, %q) = %q, want %q", tc.ns, tc.name, got, tc.want)
		}
	}
}

func TestAttemptPaths(t *testing.T) {
	for _, tc := range []struct {
		name                                   string
		ta                                     *flytev1.TaskAction
		attempt                                int32
		prefix, outputs, errDoc, ckpt, prevCkp string
	}{
		{
			name: "bucket and path, trailing slash", ta: pathTA("flyte", "r1-a0", "s3://bucket/p/d/r1/", "a0"), attempt: 1,
			prefix: "s3://bucket/xt/p/d/r1/a0/1", outputs: "s3://bucket/xt/p/d/r1/a0/1/outputs.pb", errDoc: "s3://bucket/xt/p/d/r1/a0/1/error.pb",
			ckpt: "s3://bucket/xt/p/d/r1/a0/1/_flytecheckpoints", prevCkp: "",
		},
		{
			name: "second attempt resumes from the first", ta: pathTA("flyte", "r1-a0", "s3://bucket/p/d/r1", "a0"), attempt: 2,
			prefix: "s3://bucket/xt/p/d/r1/a0/2", outputs: "s3://bucket/xt/p/d/r1/a0/2/outputs.pb", errDoc: "s3://bucket/xt/p/d/r1/a0/2/error.pb",
			ckpt: "s3://bucket/xt/p/d/r1/a0/2/_flytecheckpoints", prevCkp: "s3://bucket/xt/p/d/r1/a0/1/_flytecheckpoints",
		},
		{
			name: "bucket only; attempt 0 counts as 1", ta: pathTA("default", "hello", "gs://b", "hello"), attempt: 0,
			prefix: "gs://b/v3/hello/1", outputs: "gs://b/v3/hello/1/outputs.pb", errDoc: "gs://b/v3/hello/1/error.pb",
			ckpt: "gs://b/v3/hello/1/_flytecheckpoints",
		},
		{
			name: "the base path loses its leading and trailing slashes", ta: pathTA("ns", "run-abc", "s3://b//x//", "n1"), attempt: 3,
			prefix: "s3://b/23/x/n1/3", outputs: "s3://b/23/x/n1/3/outputs.pb", errDoc: "s3://b/23/x/n1/3/error.pb",
			ckpt: "s3://b/23/x/n1/3/_flytecheckpoints", prevCkp: "s3://b/23/x/n1/2/_flytecheckpoints",
		},
		{
			name: "characters a URL path escapes", ta: pathTA("default", "hello", "s3://b/my run", "a"), attempt: 1,
			prefix: "s3://b/v3/my%20run/a/1", outputs: "s3://b/v3/my%20run/a/1/outputs.pb", errDoc: "s3://b/v3/my%20run/a/1/error.pb",
			ckpt: "s3://b/v3/my%20run/a/1/_flytecheckpoints",
		},
		{name: "no output base", ta: pathTA("default", "hello", "", "a"), attempt: 2},
		{name: "not a URL", ta: pathTA("default", "hello", "s3://b/%zz", "a"), attempt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct{ what, got, want string }{
				{"OutputPrefix", OutputPrefix(tc.ta, tc.attempt), tc.prefix},
				{"RawOutputDataPrefix", RawOutputDataPrefix(tc.ta, tc.attempt), tc.prefix},
				{"OutputURI", OutputURI(tc.ta, tc.attempt), tc.outputs},
				{"ErrorURI", ErrorURI(tc.ta, tc.attempt), tc.errDoc},
				{"CheckpointPrefix", CheckpointPrefix(tc.ta, tc.attempt), tc.ckpt},
				{"PrevCheckpointPrefix", PrevCheckpointPrefix(tc.ta, tc.attempt), tc.prevCkp},
			} {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
				}
			}
		})
	}
}
