package task

import (
	"testing"

	sigsjson "sigs.k8s.io/json"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// Objects that an older CRD (or a client that skipped validation) could have
// stored must still be read by the Go type, as the informer reads them; the
// decoder then fails that TaskAction alone, naming the field.
func TestStoredObjectsAlwaysDecode(t *testing.T) {
	for _, tc := range []struct {
		name, json, field, reason string
	}{
		{
			name:  "the typed template in spec.taskTemplate (the old CRD)",
			json:  `{"spec":{"runName":"r","project":"p","domain":"d","actionName":"a","taskTemplate":{"timeout":"1d","container":{"image":"busybox"}}}}`,
			field: "spec.taskTemplate", reason: "holds JSON, not a serialized flyteidl2.core.TaskTemplate",
		},
		{
			name:  "a timeout in days",
			json:  `{"spec":{"runName":"r","project":"p","domain":"d","actionName":"a","template":{"timeout":"1d","container":{"image":"busybox"}}}}`,
			field: "spec.template.timeout", reason: `unknown unit "d"`,
		},
		{
			name:  "containers that are not a list",
			json:  `{"spec":{"runName":"r","project":"p","domain":"d","actionName":"a","template":{"container":{"image":"busybox"},"podTemplate":{"spec":{"containers":{"name":"x"}}}}}}`,
			field: "spec.template.podTemplate.spec.containers", reason: "must be a list",
		},
		{
			name:  "a pod spec that is a string",
			json:  `{"spec":{"runName":"r","project":"p","domain":"d","actionName":"a","template":{"container":{"image":"busybox"},"podTemplate":{"spec":"oops"}}}}`,
			field: "spec.template.podTemplate.spec", reason: "must be a pod spec object",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := &flytev1.TaskAction{}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(tc.json), ta); err != nil {
				t.Fatalf("the Go type cannot read a stored object: %v", err)
			}
			_, err := FromTaskAction(ta)
			wantFieldErr(t, err, tc.field, tc.reason)
		})
	}
}
