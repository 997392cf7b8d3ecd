package container

import (
	"encoding/base32"
	"fmt"
	"strconv"

	protov1 "github.com/golang/protobuf/proto" //nolint:staticcheck // Flyte's secret annotations are this package's text form.

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/task"
)

// secretEncoding is Flyte's base32 alphabet for secret annotations, unpadded.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz123456").WithPadding(base32.NoPadding)

// maxSecretAnnotation is the API server's limit on all annotations together.
const maxSecretAnnotation = 256 << 10

// SecretAnnotations are the pod annotations that ask the secret-injection
// webhook for the task's secrets: AnnotationSecretPrefix+index holds the
// base32 of the protobuf text form of flyteidl2.core.Secret, byte for byte
// what Flyte's executor writes, so either webhook reads either pod.
func SecretAnnotations(secrets []task.Secret) (map[string]string, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(secrets))
	for i, s := range secrets {
		mount, ok := core.Secret_MountType_value[string(s.Mount)]
		if !ok {
			if s.Mount != "" {
				return nil, fmt.Errorf("secret %d: unknown mount requirement %q", i, s.Mount)
			}
			mount = int32(core.Secret_ANY)
		}
		msg := &core.Secret{Group: s.Group, GroupVersion: s.GroupVersion, Key: s.Key, MountRequirement: core.Secret_MountType(mount), EnvVar: s.EnvVar}
		v := secretEncoding.EncodeToString([]byte(protov1.MarshalTextString(msg)))
		if len(v) > maxSecretAnnotation {
			return nil, fmt.Errorf("secret %d: its description is longer than %d bytes", i, maxSecretAnnotation)
		}
		out[AnnotationSecretPrefix+strconv.Itoa(i)] = v
	}
	return out, nil
}
