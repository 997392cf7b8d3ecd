// Package secrets holds the domain's words for the secrets a task asks for:
// the Request, how requests travel on a task pod, and the secret managers
// that turn them into references the pod's containers can read. Both the pod
// builder (pkg/plugin/container), which writes the requests on the pods it
// builds, and the pod webhook (pkg/webhook), which injects them, use it; it
// imports neither.
//
// A pod asks for secrets with Flyte's annotations: `flyte.secrets/s<i>` holds
// the base32 (alphabet a-z1-6, no padding) of the protobuf text form of
// flyteidl2.core.Secret, so that pods built by Flyte's executor and by this
// one are read alike. Pods that carry such requests are labelled
// `inject-flyte-secrets: "true"`; the webhook's object selector matches that
// label, and no other pod reaches it.
package secrets

import (
	"encoding/base32"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// The pod contract shared with the pod builder.
const (
	// AnnotationPrefix followed by the request's index names one request.
	AnnotationPrefix = "flyte.secrets/s"
	// PodLabel marks pods whose secret requests must be injected.
	PodLabel      = "inject-flyte-secrets"
	PodLabelValue = "true"
)

// Environment variables that tell the task runtime where secrets are.
const (
	EnvEnvPrefix  = "FLYTE_SECRETS_ENV_PREFIX"
	EnvDefaultDir = "FLYTE_SECRETS_DEFAULT_DIR"
	EnvFilePrefix = "FLYTE_SECRETS_FILE_PREFIX"
)

// MountType is how a task wants a secret: Flyte's Secret.MountType.
type MountType int32

const (
	MountAny    MountType = 0
	MountEnvVar MountType = 1
	MountFile   MountType = 2
)

var mountNames = map[MountType]string{MountAny: "ANY", MountEnvVar: "ENV_VAR", MountFile: "FILE"}

func (m MountType) String() string {
	if s, ok := mountNames[m]; ok {
		return s
	}
	return "MountType(" + strconv.Itoa(int(m)) + ")"
}

// Request is one secret a task asks for (Flyte's core.Secret).
type Request struct {
	// Group names the secret in its manager (a Kubernetes Secret, a Vault path).
	Group string
	// GroupVersion selects a version where the manager has versions.
	GroupVersion string
	// Key selects one value inside the group.
	Key string
	// Mount says whether the task wants an environment variable or a file.
	Mount MountType
	// EnvVar, if set, is an extra environment variable: the value for
	// ENV_VAR, the file's path for FILE.
	EnvVar string
}

func (r Request) String() string {
	return fmt.Sprintf("%s/%s (%s)", r.Group, r.Key, r.Mount)
}

// encoding is Flyte's base32 alphabet for annotation values.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz123456").WithPadding(base32.NoPadding)

// EncodeText is r in protobuf text form, fields in number order, default
// values omitted, as Flyte writes it.
func EncodeText(r Request) string {
	var b strings.Builder
	str := func(name, v string) {
		if v != "" {
			b.WriteString(name + ": " + quote(v) + "\n")
		}
	}
	str("group", r.Group)
	str("group_version", r.GroupVersion)
	str("key", r.Key)
	if r.Mount != MountAny {
		b.WriteString("mount_requirement: " + r.Mount.String() + "\n")
	}
	str("env_var", r.EnvVar)
	return b.String()
}

// quote writes a text-format string literal: printable ASCII and UTF-8 as
// they are, everything else as octal escapes, which every text parser reads.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// DecodeText parses the protobuf text form of a Secret. Fields this
// executor does not know are ignored, so newer writers stay readable.
func DecodeText(text string) (Request, error) {
	m := &core.Secret{}
	if err := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(text), m); err != nil {
		return Request{}, err
	}
	r := Request{
		Group:        m.GetGroup(),
		GroupVersion: m.GetGroupVersion(),
		Key:          m.GetKey(),
		Mount:        MountType(m.GetMountRequirement()),
		EnvVar:       m.GetEnvVar(),
	}
	if _, ok := mountNames[r.Mount]; !ok {
		return Request{}, fmt.Errorf("unknown mount requirement %d", r.Mount)
	}
	return r, nil
}

// Annotations are the pod annotations that carry reqs.
func Annotations(reqs []Request) map[string]string {
	out := make(map[string]string, len(reqs))
	for i, r := range reqs {
		out[AnnotationPrefix+strconv.Itoa(i)] = encoding.EncodeToString([]byte(EncodeText(r)))
	}
	return out
}

// FromAnnotations reads the secret requests of a pod, in index order. An
// annotation that does not decode is an error naming it.
func FromAnnotations(ann map[string]string) ([]Request, error) {
	type indexed struct {
		i int
		r Request
	}
	var found []indexed
	for k, v := range ann {
		suffix, ok := strings.CutPrefix(k, AnnotationPrefix)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(suffix)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("annotation %s: the suffix after %q must be an index", k, AnnotationPrefix)
		}
		raw, err := encoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: not base32 (alphabet a-z1-6, no padding): %v", k, err)
		}
		r, err := DecodeText(string(raw))
		if err != nil {
			return nil, fmt.Errorf("annotation %s: not a flyteidl2.core.Secret in text form: %v", k, err)
		}
		found = append(found, indexed{i, r})
	}
	sort.Slice(found, func(a, b int) bool { return found[a].i < found[b].i })
	out := make([]Request, len(found))
	for j, f := range found {
		out[j] = f.r
	}
	return out, nil
}
