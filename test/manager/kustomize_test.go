package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskaction/executor/internal/testenv"
)

// kustomize renders a directory under config/ with the kubectl on the machine.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("kubectl", "kustomize", filepath.Join(root, "config", dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, out)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("render of config/%s is not YAML: %v", dir, err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		// Unstructured's own decoding keeps integers int64, as the server returns them.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("config/%s: %v", dir, err)
		}
		objs = append(objs, u)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func TestKustomizeDefaultRenders(t *testing.T) {
	objs := kustomize(t, "default")
	const ns = "executor-system"

	for _, want := range []struct{ kind, name string }{
		{"Namespace", ns},
		{"CustomResourceDefinition", "taskactions.flyte.org"},
		{"ServiceAccount", "executor-controller-manager"},
		{"Deployment", "executor-controller-manager"},
		{"Service", "executor-controller-manager-metrics-service"},
		{"Role", "executor-leader-election-role"},
		{"RoleBinding", "executor-leader-election-rolebinding"},
		{"ClusterRole", "executor-metrics-auth-role"},
		{"ClusterRoleBinding", "executor-metrics-auth-rolebinding"},
		{"ClusterRole", "executor-metrics-reader"},
		{"ClusterRoleBinding", "executor-manager-rolebinding"},
		{"Role", "executor-manager-role"},
		{"RoleBinding", "executor-manager-rolebinding"},
		{"Service", "executor-webhook-service"},
		{"MutatingWebhookConfiguration", "executor-mutating-webhook-configuration"},
		{"ValidatingWebhookConfiguration", "executor-validating-webhook-configuration"},
	} {
		if find(objs, want.kind, want.name) == nil {
			t.Errorf("render lacks %s %s", want.kind, want.name)
		}
	}
	for _, o := range objs {
		scoped := o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" &&
			o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" &&
			o.GetKind() != "MutatingWebhookConfiguration" && o.GetKind() != "ValidatingWebhookConfiguration"
		if scoped && o.GetNamespace() != ns {
			t.Errorf("%s %s in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
		}
	}

	// Every binding points at a rendered role and service account, so the prefix
	// reached both ends.
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if find(objs, kind, name) == nil {
			t.Errorf("%s %s refers to %s %s, which is not rendered", o.GetKind(), o.GetName(), kind, name)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			sm := s.(map[string]any)
			if sm["kind"] == "ServiceAccount" && (sm["name"] != "executor-controller-manager" || sm["namespace"] != ns) {
				t.Errorf("%s %s binds %v/%v", o.GetKind(), o.GetName(), sm["namespace"], sm["name"])
			}
		}
	}

	dep := find(objs, "Deployment", "executor-controller-manager")
	if dep == nil {
		t.Fatal("no Deployment")
	}
	var d struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dep.Object, &d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "executor-controller-manager" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Command, []string{"/executor"}) {
		t.Errorf("command %v", c.Command)
	}
	for _, a := range []string{"--executor.leaderElect=true", "--executor.metricsBindAddress=:8443", "--executor.healthProbeBindAddress=:8081"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %v lack %s", c.Args, a)
		}
	}
	podNS := false
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			podNS = true
		}
	}
	if !podNS {
		t.Errorf("no POD_NAMESPACE from the downward API: %+v", c.Env)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") ||
		pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("not a restricted security context: pod %+v container %+v", pod.SecurityContext, sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}

	svc := find(objs, "Service", "executor-controller-manager-metrics-service")
	if svc != nil {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		for k, v := range sel {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("metrics Service selector %v does not select the pods %v", sel, d.Spec.Template.Labels)
			}
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		if len(ports) != 1 || ports[0].(map[string]any)["port"] != int64(8443) {
			t.Errorf("metrics Service ports %v", ports)
		}
	}

	// The webhook is on, and its configurations reach the manager's webhook port
	// through the rendered Service.
	if !slices.Contains(c.Args, "--executor.webhook.enabled=true") {
		t.Errorf("args %v do not enable the webhook", c.Args)
	}
	webhookPort := false
	for _, p := range c.Ports {
		webhookPort = webhookPort || (p.Name == "webhook" && p.ContainerPort == 9443)
	}
	if !webhookPort {
		t.Errorf("container ports %+v lack webhook 9443", c.Ports)
	}
	if wsvc := find(objs, "Service", "executor-webhook-service"); wsvc != nil {
		ports, _, _ := unstructured.NestedSlice(wsvc.Object, "spec", "ports")
		if len(ports) != 1 || ports[0].(map[string]any)["targetPort"] != "webhook" {
			t.Errorf("webhook Service ports %v", ports)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				svcName, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "name")
				svcNS, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace")
				if svcName != "executor-webhook-service" || svcNS != ns {
					t.Errorf("%s %s calls %s/%s", kind, o.GetName(), svcNS, svcName)
				}
			}
		}
	}
}

// The rendered installation is accepted by the API server as it stands, and
// its RBAC grants the executor what it needs.
func TestKustomizeDefaultIsAdmitted(t *testing.T) {
	ctx := context.Background()
	objs := kustomize(t, "default")
	c := env.Client
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if err := c.Create(ctx, o.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("namespace: %v", err)
			}
		}
	}
	strict := client.FieldValidation("Strict")
	for _, o := range objs {
		o := o.DeepCopy()
		switch o.GetKind() {
		case "Namespace":
			continue
		case "CustomResourceDefinition":
			// Installed by envtest from the same bases; an update proves the rendered copy is valid.
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				t.Fatal(err)
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			if err := c.Update(ctx, o, client.DryRunAll, strict); err != nil {
				t.Errorf("CRD rejected: %v", err)
			}
			continue
		}
		if err := c.Create(ctx, o, client.DryRunAll, strict); err != nil {
			t.Errorf("%s %s rejected: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if t.Failed() {
		return
	}

	// Install the RBAC for real and ask the authorizer about the executor's identity.
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			o := o.DeepCopy()
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			// Removed again so that the dry run above meets a clean cluster on -count=N.
			t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
		}
	}
	const sa = "system:serviceaccount:executor-system:executor-controller-manager"
	allowed := func(user string, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) bool {
		t.Helper()
		sar, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: ra, NonResourceAttributes: nra},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, tc := range []struct {
		name string
		ra   authorizationv1.ResourceAttributes
		want bool
	}{
		{"update the leader Lease", authorizationv1.ResourceAttributes{Namespace: "executor-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: leaseName}, true},
		{"create leader-election events", authorizationv1.ResourceAttributes{Namespace: "executor-system", Verb: "create", Resource: "events"}, true},
		{"create TokenReviews", authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{"create SubjectAccessReviews", authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, true},
		{"watch TaskActions anywhere", authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "watch", Group: "flyte.org", Resource: "taskactions"}, true},
		{"create pods anywhere", authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "create", Resource: "pods"}, true},
		{"no deleting the leader Lease", authorizationv1.ResourceAttributes{Namespace: "executor-system", Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Name: leaseName}, false},
		{"no Leases outside its namespace", authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}, false},
		{"no secrets", authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "get", Resource: "secrets"}, false},
		{"no secrets created elsewhere", authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "create", Resource: "secrets"}, false},
		{"create its webhook Secret", authorizationv1.ResourceAttributes{Namespace: "executor-system", Verb: "create", Resource: "secrets"}, true},
		{"update its webhook Secret", authorizationv1.ResourceAttributes{Namespace: "executor-system", Verb: "update", Resource: "secrets", Name: "executor-webhook-cert"}, true},
		{"no other Secret of its namespace", authorizationv1.ResourceAttributes{Namespace: "executor-system", Verb: "get", Resource: "secrets", Name: "other"}, false},
		{"patch its webhook configuration", authorizationv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "executor-mutating-webhook-configuration"}, true},
		{"no other webhook configuration", authorizationv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "someone-elses"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowed(sa, &tc.ra, nil); got != tc.want {
				t.Errorf("allowed = %v, want %v", got, tc.want)
			}
		})
	}
}

// The samples are admitted as written: strict field validation rejects unknown
// fields, and reading back the spec unchanged proves nothing was pruned.
func TestSamplesAreAdmitted(t *testing.T) {
	ctx := context.Background()
	objs := kustomize(t, "samples")
	if len(objs) < 3 {
		t.Fatalf("%d samples, want at least 3", len(objs))
	}
	ns := newNamespace(t, "samples-")
	names := map[string]bool{}
	for _, o := range objs {
		o := o.DeepCopy()
		if o.GetKind() != "TaskAction" {
			t.Errorf("sample %s is a %s", o.GetName(), o.GetKind())
			continue
		}
		names[o.GetName()] = true
		o.SetNamespace(ns)
		sent := o.DeepCopy()
		if err := env.Client.Create(ctx, o, client.FieldValidation("Strict")); err != nil {
			t.Errorf("sample %s rejected: %v", o.GetName(), err)
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sent.Object["spec"], got.Object["spec"]) {
			t.Errorf("sample %s: spec changed on the server:\nsent %v\ngot  %v", o.GetName(), sent.Object["spec"], got.Object["spec"])
		}
	}
	checks := map[string][]string{
		"hello":  {"spec", "template", "container", "command"},
		"exit-3": {"spec", "template", "retries"},
		"cached": {"spec", "cacheKey"},
	}
	for name, path := range checks {
		o := find(objs, "TaskAction", name)
		if o == nil {
			t.Errorf("no sample %s", name)
			continue
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, path...); !ok {
			t.Errorf("sample %s lacks %v", name, path)
		}
	}
	if o := find(objs, "TaskAction", "exit-3"); o != nil {
		if r, _, _ := unstructured.NestedInt64(o.Object, "spec", "template", "retries"); r != 2 {
			t.Errorf("exit-3 retries = %d, want 2", r)
		}
	}
}
