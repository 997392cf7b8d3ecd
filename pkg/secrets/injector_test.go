package secrets

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func taskPod() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "task", Env: []corev1.EnvVar{{Name: "KEEP", Value: "1"}}}, {Name: "sidecar"}},
	}}
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestKubernetesInjectsReferences(t *testing.T) {
	k := Kubernetes{EnvPrefix: "_FSEC_", MountDir: "/etc/flyte/secrets"}
	reqs := []Request{
		{Group: "db-creds", Key: "password", Mount: MountEnvVar, EnvVar: "DB_PASSWORD"},
		{Group: "tls", Key: "CA.crt", Mount: MountFile, EnvVar: "CA_FILE"},
		{Group: "tls", Key: "tls.key"}, // ANY: a file, in the same volume
	}
	pod := taskPod()
	if err := InjectAll(k, pod, reqs); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		ref := func(name string) *corev1.SecretKeySelector {
			e := env(c, name)
			if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
				t.Fatalf("container %s: %s = %+v, want a secretKeyRef and no value", c.Name, name, e)
			}
			return e.ValueFrom.SecretKeyRef
		}
		for _, name := range []string{"_FSEC_DB-CREDS_PASSWORD", "DB_PASSWORD"} {
			if r := ref(name); r.Name != "db-creds" || r.Key != "password" || r.Optional != nil {
				t.Errorf("container %s: %s refers to %+v", c.Name, name, r)
			}
		}
		for name, want := range map[string]string{
			EnvEnvPrefix:  "_FSEC_",
			EnvDefaultDir: "/etc/flyte/secrets",
			EnvFilePrefix: "",
			"CA_FILE":     "/etc/flyte/secrets/tls/ca.crt",
		} {
			if e := env(c, name); e == nil || e.Value != want {
				t.Errorf("container %s: %s = %+v, want %q", c.Name, name, e, want)
			}
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/flyte/secrets/tls" || !c.VolumeMounts[0].ReadOnly {
			t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
		}
	}
	if e := env(pod.Spec.Containers[0], "KEEP"); e == nil || e.Value != "1" {
		t.Errorf("the task's own variable is lost: %+v", pod.Spec.Containers[0].Env)
	}
	if len(pod.Spec.Volumes) != 1 {
		t.Fatalf("volumes %+v, want one for Secret tls", pod.Spec.Volumes)
	}
	v := pod.Spec.Volumes[0]
	want := []corev1.KeyToPath{{Key: "CA.crt", Path: "ca.crt"}, {Key: "tls.key", Path: "tls.key"}}
	if v.Secret == nil || v.Secret.SecretName != "tls" || v.Secret.Optional != nil || !reflect.DeepEqual(v.Secret.Items, want) {
		t.Errorf("volume %+v", v)
	}

	// Admitting the same pod again changes nothing.
	again := pod.DeepCopy()
	if err := InjectAll(k, again, reqs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, pod) {
		t.Errorf("a second injection changed the pod")
	}
	// No value of any Secret can be in the pod: the webhook never read one.
	raw, _ := json.Marshal(pod)
	if strings.Contains(string(raw), `"value":"s3cr3t`) {
		t.Error("a secret value in the pod")
	}
}

func TestKubernetesSecretWithoutGroupUsesFlytesName(t *testing.T) {
	pod := taskPod()
	if err := (Kubernetes{EnvPrefix: "_FSEC_", MountDir: "/s"}).Inject(pod, Request{Key: "my_key", Mount: MountEnvVar}); err != nil {
		t.Fatal(err)
	}
	const name = "9ed6e46a3ff88783ff75296a4ba523f9" // md5 of "my_key"
	e := env(pod.Spec.Containers[0], "_FSEC_"+strings.ToUpper(name)+"_MY_KEY")
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != name || e.ValueFrom.SecretKeyRef.Key != "my_key" {
		t.Fatalf("env %+v", pod.Spec.Containers[0].Env)
	}
}

func TestInjectorsRefuseWhatTheyCannotServe(t *testing.T) {
	k := Kubernetes{EnvPrefix: "_FSEC_", MountDir: "/etc/flyte/secrets"}
	v := Vault{Role: "flyte", KVVersion: "2", MountDir: "/etc/flyte/secrets"}
	cases := []struct {
		name string
		inj  Injector
		req  Request
		want string
	}{
		{"kubernetes without key", k, Request{Group: "g"}, "needs a key"},
		{"kubernetes bad name", k, Request{Group: "Not_A_Name", Key: "k"}, "is not a Kubernetes Secret name"},
		{"kubernetes bad key", k, Request{Group: "g", Key: "a/b"}, "is not a Kubernetes Secret key"},
		{"vault env var", v, Request{Group: "secret/data/db", Key: "pw", Mount: MountEnvVar}, "ENV_VAR is not supported"},
		{"vault without group", v, Request{Key: "pw", Mount: MountFile}, "needs a group"},
		{"vault template escape", v, Request{Group: `secret/x" }}{{ with secret "other`, Key: "pw"}, "must not contain"},
		{"vault unknown version", v, Request{Group: "secret/x", GroupVersion: "kv9", Key: "pw"}, "is not one of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := InjectAll(tc.inj, taskPod(), []Request{tc.req})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "secret 0") {
				t.Errorf("error %v, want one naming secret 0 and containing %q", err, tc.want)
			}
		})
	}
}

func TestVaultAnnotatesForTheAgent(t *testing.T) {
	v := Vault{Role: "flyte", KVVersion: "2", MountDir: "/etc/flyte/secrets"}
	pod := taskPod()
	pod.Annotations = map[string]string{"user": "kept"}
	reqs := []Request{
		{Group: "secret/data/db", Key: "password", Mount: MountFile, EnvVar: "DB_PW_FILE"},
		{Group: "secret/legacy", GroupVersion: "kv1", Key: "token"},
	}
	if err := InjectAll(v, pod, reqs); err != nil {
		t.Fatal(err)
	}
	a := pod.Annotations
	for k, want := range map[string]string{
		"user":                                        "kept",
		"vault.hashicorp.com/agent-inject":            "true",
		"vault.hashicorp.com/role":                    "flyte",
		"vault.hashicorp.com/secret-volume-path":      "/etc/flyte/secrets",
		"vault.hashicorp.com/agent-pre-populate-only": "true",
	} {
		if a[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, a[k], want)
		}
	}
	var secretsSeen, templates []string
	for k, val := range a {
		switch {
		case strings.HasPrefix(k, "vault.hashicorp.com/agent-inject-secret-"):
			secretsSeen = append(secretsSeen, val)
			id := strings.TrimPrefix(k, "vault.hashicorp.com/agent-inject-secret-")
			file := a["vault.hashicorp.com/agent-inject-file-"+id]
			tpl := a["vault.hashicorp.com/agent-inject-template-"+id]
			templates = append(templates, tpl)
			switch val {
			case "secret/data/db":
				if file != "secret/data/db/password" || tpl != `{{- with secret "secret/data/db" -}}{{ index .Data.data "password" }}{{- end -}}` {
					t.Errorf("kv2 secret: file %q template %q", file, tpl)
				}
			case "secret/legacy":
				if file != "secret/legacy/token" || tpl != `{{- with secret "secret/legacy" -}}{{ index .Data "token" }}{{- end -}}` {
					t.Errorf("kv1 secret: file %q template %q", file, tpl)
				}
			}
		}
	}
	if len(secretsSeen) != 2 {
		t.Errorf("agent-inject-secret annotations for %v, want both paths", secretsSeen)
	}
	if e := env(pod.Spec.Containers[0], "DB_PW_FILE"); e == nil || e.Value != "/etc/flyte/secrets/secret/data/db/password" {
		t.Errorf("DB_PW_FILE = %+v", e)
	}
	if len(pod.Spec.Volumes) != 0 {
		t.Errorf("the agent brings its own volume; got %+v", pod.Spec.Volumes)
	}

	again := pod.DeepCopy()
	if err := InjectAll(v, again, reqs); err != nil || !reflect.DeepEqual(again, pod) {
		t.Errorf("a second injection changed the pod (err %v)", err)
	}
	// A pod that already names another role is refused, not silently re-roled.
	other := taskPod()
	other.Annotations = map[string]string{"vault.hashicorp.com/role": "admin"}
	if err := v.Inject(other, reqs[0]); err == nil || !strings.Contains(err.Error(), "already set") {
		t.Errorf("error %v, want the role conflict", err)
	}
}
