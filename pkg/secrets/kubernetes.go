package secrets

import (
	"crypto/md5" // #nosec G501 -- a name, not a security hash; it must match Flyte's
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kubernetes serves secrets from Kubernetes Secrets in the pod's namespace,
// by reference: ENV_VAR as secretKeyRef variables, FILE (and ANY) as secret
// volumes. The kubelet resolves the references, so the value never appears
// in the pod, and the webhook never reads a Secret (it needs no permission
// on them). A Secret or key that does not exist keeps the container in
// CreateContainerConfigError (variables) or the pod in ContainerCreating
// (volumes), naming it; the references are not optional, so a task never
// starts without a secret it asked for.
type Kubernetes struct {
	// EnvPrefix prefixes ENV_VAR variables (Flyte's runtime default: _FSEC_).
	EnvPrefix string
	// MountDir is where FILE secrets appear, as <MountDir>/<group>/<key>.
	MountDir string
}

// Name implements Injector.
func (Kubernetes) Name() string { return "kubernetes" }

// SecretName is the Kubernetes Secret of r: its group, or, for a request
// without a group, the MD5 hex of its key (Flyte's secret service names the
// Secrets it creates so).
func SecretName(r Request) string {
	if r.Group != "" {
		return r.Group
	}
	sum := md5.Sum([]byte(r.Key)) // #nosec G401
	return hex.EncodeToString(sum[:])
}

// Inject implements Injector.
func (k Kubernetes) Inject(pod *corev1.Pod, r Request) error {
	if r.Key == "" {
		return fmt.Errorf("a Kubernetes secret needs a key")
	}
	name := SecretName(r)
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("group %q is not a Kubernetes Secret name: %s", name, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsConfigMapKey(r.Key); len(msgs) > 0 {
		return fmt.Errorf("key %q is not a Kubernetes Secret key: %s", r.Key, strings.Join(msgs, "; "))
	}
	r.Group = name
	switch r.Mount {
	case MountEnvVar:
		return k.injectEnv(pod, r)
	case MountFile, MountAny:
		return k.injectFile(pod, r)
	}
	return fmt.Errorf("unknown mount requirement %s", r.Mount)
}

func (k Kubernetes) injectEnv(pod *corev1.Pod, r Request) error {
	ref := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: r.Group},
		Key:                  r.Key,
	}}
	setEnv(pod, corev1.EnvVar{Name: EnvVarName(k.EnvPrefix, r), ValueFrom: ref})
	if r.EnvVar != "" {
		setEnv(pod, corev1.EnvVar{Name: r.EnvVar, ValueFrom: ref.DeepCopy()})
	}
	setEnv(pod, corev1.EnvVar{Name: EnvEnvPrefix, Value: k.EnvPrefix})
	return nil
}

// volumeName is the pod volume of one Secret: a DNS label whatever the
// Secret's name (up to 253 characters).
func volumeName(secret string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(secret))
	return fmt.Sprintf("flyte-secret-%016x", h.Sum64())
}

func (k Kubernetes) injectFile(pod *corev1.Pod, r Request) error {
	vol := volumeName(r.Group)
	item := corev1.KeyToPath{Key: r.Key, Path: strings.ToLower(r.Key)}
	found := false
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Name != vol {
			continue
		}
		if v.Secret == nil || v.Secret.SecretName != r.Group {
			return fmt.Errorf("the pod already has a volume %s that is not Secret %s", vol, r.Group)
		}
		found = true
		present := false
		for _, it := range v.Secret.Items {
			present = present || it.Key == item.Key
		}
		if !present {
			v.Secret.Items = append(v.Secret.Items, item)
		}
	}
	if !found {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name: vol,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: r.Group,
				Items:      []corev1.KeyToPath{item},
			}},
		})
	}
	dir := path.Join(k.MountDir, strings.ToLower(r.Group))
	if err := addMount(pod, corev1.VolumeMount{Name: vol, MountPath: dir, ReadOnly: true}); err != nil {
		return err
	}
	setEnv(pod, corev1.EnvVar{Name: EnvDefaultDir, Value: k.MountDir})
	setEnv(pod, corev1.EnvVar{Name: EnvFilePrefix, Value: ""})
	if r.EnvVar != "" {
		setEnv(pod, corev1.EnvVar{Name: r.EnvVar, Value: path.Join(dir, item.Path)})
	}
	return nil
}
