package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/quantity"
)

var podSpecType = reflect.TypeFor[corev1.PodSpec]()

// DefaultTypedPrimaryContainerName is the task container's name in the typed
// form when its pod template names none.
const DefaultTypedPrimaryContainerName = "task"

// fromTyped decodes the typed, human-writable template; field is its path in
// the TaskAction, for error messages.
func fromTyped(tt *flytev1.TypedTaskTemplate, field string) (*Task, error) {
	t := &Task{
		Form:    FormTyped,
		ID:      Identifier{Name: tt.ID.Name, Version: tt.ID.Version},
		Retries: tt.Retries,
		Config:  tt.Config,
		Cache:   Cache{Serializable: tt.CacheSerializable},
	}
	if tt.Retries < 0 {
		return nil, fieldErr(field+".retries", "must not be negative, got %d", tt.Retries)
	}
	if tt.Timeout != nil {
		d, err := ParseTimeout(*tt.Timeout)
		if err != nil {
			return nil, fieldErr(field+".timeout", "%v", err)
		}
		t.Timeout = d
	}
	if c := tt.Container; c != nil {
		t.Container = &Container{Image: c.Image, Command: c.Command, Args: c.Args, Env: c.Env, Resources: *c.Resources.DeepCopy()}
	}
	if sc := tt.SecurityContext; sc != nil {
		if sc.RunAs != nil {
			t.ServiceAccount = sc.RunAs.K8sServiceAccount
		}
		for i, s := range sc.Secrets {
			m := MountRequirement(s.MountRequirement)
			switch m {
			case "":
				m = MountAny
			case MountAny, MountEnvVar, MountFile:
			default:
				return nil, fieldErr(field+".securityContext.secrets["+itoa(i)+"].mountRequirement", "must be ANY, ENV_VAR or FILE, got %q", s.MountRequirement)
			}
			if s.Key == "" {
				return nil, fieldErr(field+".securityContext.secrets["+itoa(i)+"].key", "is required")
			}
			t.Secrets = append(t.Secrets, Secret{Group: s.Group, GroupVersion: s.GroupVersion, Key: s.Key, Mount: m, EnvVar: s.EnvVar})
		}
	}
	t.PrimaryContainerName = DefaultTypedPrimaryContainerName
	if pt := tt.PodTemplate; pt != nil {
		t.PodLabels, t.PodAnnotations = pt.Labels, pt.Annotations
		if pt.PrimaryContainerName != "" {
			t.PrimaryContainerName = pt.PrimaryContainerName
		}
		if pt.Spec != nil && len(pt.Spec.Raw) > 0 {
			spec, err := DecodePodSpec(pt.Spec.Raw, field+".podTemplate.spec")
			if err != nil {
				return nil, err
			}
			t.PodSpec = spec
		}
	}
	if t.Container == nil && t.PodSpec == nil {
		return nil, fieldErr(field+".container", "is required (or a podTemplate.spec with the primary container)")
	}
	if t.Container == nil {
		if err := requirePrimary(t, field+".podTemplate.primaryContainerName"); err != nil {
			return nil, err
		}
	}
	if t.Container != nil && t.Container.Image == "" && !podSpecHasImage(t.PodSpec, t.PrimaryContainerName) {
		return nil, fieldErr(field+".container.image", "is required")
	}
	return t, nil
}

func podSpecHasImage(spec *corev1.PodSpec, name string) bool {
	if spec == nil {
		return false
	}
	for _, c := range spec.Containers {
		if c.Name == name {
			return c.Image != ""
		}
	}
	return false
}

// ParseTimeout parses a typed timeout: Go duration syntax, not negative. The
// CRD checks the syntax at admission; this also catches what an older CRD
// let through and values too large for a time.Duration.
func ParseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("must be a Go duration such as 90s, 1h30m or 500ms (units ns, us, ms, s, m, h): " + strings.TrimPrefix(err.Error(), "time: "))
	}
	if d < 0 {
		return 0, errors.New("must not be negative, got " + s)
	}
	return d, nil
}

// DecodePodSpec decodes a pod spec's JSON strictly: a value of the wrong type
// or a field a pod spec does not have is a *FieldError naming the field below
// field (e.g. "spec.template.podTemplate.spec.containers").
func DecodePodSpec(raw []byte, field string) (*corev1.PodSpec, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fieldErr(field, "must be a pod spec object")
	}
	// Every quantity is checked before the decoder parses it: a huge
	// exponent would never finish expanding.
	if errs := quantity.CheckTree(trimmed, podSpecType, field, 4); len(errs) > 0 {
		reasons := make([]string, 0, len(errs))
		for _, e := range errs[1:] {
			reasons = append(reasons, e.Error())
		}
		return nil, fieldErr(errs[0].Path, "%s", strings.Join(append([]string{errs[0].Err.Error()}, reasons...), "; "))
	}
	spec := &corev1.PodSpec{}
	strictErrs, err := sigsjson.UnmarshalStrict(trimmed, spec, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fieldErr(field+"."+te.Field, "must be %s, got a JSON %s", jsonKind(te.Type), te.Value)
		}
		return nil, fieldErr(field, "is not a pod spec: %v", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, strings.TrimPrefix(e.Error(), "json: "))
		}
		return nil, fieldErr(field, "is not a pod spec: %s", strings.Join(msgs, "; "))
	}
	return spec, nil
}

// jsonKind names a Go kind as the JSON a client would write for it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Interface:
		return "a JSON value"
	}
	return "a number"
}
