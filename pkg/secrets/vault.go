package secrets

import (
	"fmt"
	"hash/fnv"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Annotations of HashiCorp's Vault agent injector.
const (
	vaultPrefix           = "vault.hashicorp.com/"
	vaultInject           = vaultPrefix + "agent-inject"
	vaultRole             = vaultPrefix + "role"
	vaultVolumePath       = vaultPrefix + "secret-volume-path"
	vaultPrePopulateOnly  = vaultPrefix + "agent-pre-populate-only"
	vaultSecretPrefix     = vaultPrefix + "agent-inject-secret-"
	vaultFilePrefix       = vaultPrefix + "agent-inject-file-"
	vaultTemplatePrefix   = vaultPrefix + "agent-inject-template-"
	vaultGroupVersionKV1  = "kv1"
	vaultGroupVersionKV2  = "kv2"
	vaultGroupVersionDB   = "db"
	vaultForbiddenInNames = "\"\\{}`\n\r"
)

// Vault serves FILE (and ANY) secrets through the Vault agent injector,
// which must run in the cluster: the pod gets the agent's annotations, and
// the agent's own webhook adds an init container that writes each secret to
// <MountDir>/<group>/<key> before the task starts. The group is the Vault
// path, the key the field inside it. Neither the value nor a Vault token
// appears in the pod. ENV_VAR is refused: the agent writes files only.
type Vault struct {
	// Role is the Vault Kubernetes-auth role the agent logs in with.
	Role string
	// KVVersion ("1" or "2") chooses how a field is read when the request's
	// group version does not say (kv1, kv2, db).
	KVVersion string
	// MountDir is the agent's secret volume path.
	MountDir string
}

// Name implements Injector.
func (Vault) Name() string { return "vault" }

// Inject implements Injector.
func (v Vault) Inject(pod *corev1.Pod, r Request) error {
	if r.Group == "" || r.Key == "" {
		return fmt.Errorf("a Vault secret needs a group (the Vault path) and a key")
	}
	if strings.ContainsAny(r.Group, vaultForbiddenInNames) || strings.ContainsAny(r.Key, vaultForbiddenInNames) || strings.Contains(r.Group, "..") {
		// Both end up in an agent template: nothing may escape its string.
		return fmt.Errorf("group and key must not contain quotes, backslashes, braces, backquotes, newlines or \"..\"")
	}
	switch r.Mount {
	case MountFile, MountAny:
	case MountEnvVar:
		return fmt.Errorf("the Vault agent writes files: ENV_VAR is not supported, ask for FILE")
	default:
		return fmt.Errorf("unknown mount requirement %s", r.Mount)
	}
	var query string
	switch r.GroupVersion {
	case vaultGroupVersionKV1:
		query = ".Data"
	case vaultGroupVersionKV2:
		query = ".Data.data"
	case vaultGroupVersionDB:
		// Database credentials: the agent's default rendering.
	case "":
		query = ".Data.data"
		if v.KVVersion == "1" {
			query = ".Data"
		}
	default:
		return fmt.Errorf("group version %q is not one of kv1, kv2, db", r.GroupVersion)
	}

	// A stable id keeps a second admission of the same pod idempotent.
	h := fnv.New64a()
	_, _ = h.Write([]byte(r.Group + "\x00" + r.GroupVersion + "\x00" + r.Key))
	id := fmt.Sprintf("flyte-%016x", h.Sum64())
	rel := path.Join(strings.ToLower(r.Group), strings.ToLower(r.Key))
	want := map[string]string{
		vaultInject:            "true",
		vaultRole:              v.Role,
		vaultVolumePath:        v.MountDir,
		vaultPrePopulateOnly:   "true",
		vaultSecretPrefix + id: r.Group,
		vaultFilePrefix + id:   rel,
	}
	if query != "" {
		want[vaultTemplatePrefix+id] = fmt.Sprintf(`{{- with secret "%s" -}}{{ index %s "%s" }}{{- end -}}`, r.Group, query, r.Key)
	}
	for k, val := range want {
		if err := setAnnotation(pod, k, val); err != nil {
			return err
		}
	}
	setEnv(pod, corev1.EnvVar{Name: EnvDefaultDir, Value: v.MountDir})
	setEnv(pod, corev1.EnvVar{Name: EnvFilePrefix, Value: ""})
	if r.EnvVar != "" {
		setEnv(pod, corev1.EnvVar{Name: r.EnvVar, Value: path.Join(v.MountDir, rel)})
	}
	return nil
}
