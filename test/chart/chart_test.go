package chart

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/taskaction/executor/pkg/config"
)

// valueSet is one way of installing the chart.
type valueSet struct {
	name   string
	values func(t *testing.T) map[string]any
}

func fixed(doc string) func(t *testing.T) map[string]any {
	return func(t *testing.T) map[string]any { return vals(t, doc) }
}

var valueSets = []valueSet{
	{"defaults", fixed("")},
	{"cert-manager", fixed(`
webhook:
  certManager: {enabled: true}
metrics:
  serviceMonitor: {enabled: true}
`)},
	{"namespaced", fixed(`
config:
  executor:
    namespaces: [team-a, team-b]
`)},
	// The values of docs/flyte-deploy.md: beside Flyte's flyte-binary.
	{"flyte", func(t *testing.T) map[string]any { return vals(t, guideBlock(t, "executor-values")) }},
}

// Every value set lints clean, renders, is accepted by the API server (server-side
// dry run, PodSecurity's restricted profile warning on the Deployment), and
// renders a configuration the executor loads, equal to the values' config:.
func TestValueSets(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			values := vs.values(t)
			lint(t, values)
			r := render(t, values)
			checkInvariants(t, r)
			dryRun(t, r.objs)

			_, cfg := r.configFile(t)
			printed, err := cfg.YAML()
			if err != nil {
				t.Fatal(err)
			}
			var eff map[string]map[string]any
			if err := yaml.Unmarshal(printed, &eff); err != nil {
				t.Fatal(err)
			}
			want := mergedExecutorValues(t, values)
			if certManagerOn(values) {
				want["webhookCertPath"] = "/etc/executor/webhook-certs" // set by the chart, see below
			}
			compareTree(t, "config.executor", want, eff["executor"])
		})
	}
}

func certManagerOn(values map[string]any) bool {
	v, _, _ := unstructured.NestedBool(values, "webhook", "certManager", "enabled")
	return v
}

// mergedExecutorValues is config.executor of values.yaml with the value set's overrides.
func mergedExecutorValues(t *testing.T, values map[string]any) map[string]any {
	t.Helper()
	def := chartValues(t)
	base, _, _ := unstructured.NestedMap(def, "config", "executor")
	over, _, _ := unstructured.NestedMap(values, "config", "executor")
	return mergeMaps(base, over)
}

func mergeMaps(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = mergeMaps(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func chartValues(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return vals(t, string(b))
}

// compareTree says where the executor's effective value differs from the chart's.
func compareTree(t *testing.T, path string, want, got any) {
	t.Helper()
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok && len(wm) > 0 {
		for k, wv := range wm {
			compareTree(t, path+"."+k, wv, gm[k])
		}
		return
	}
	if !sameValue(want, got) {
		t.Errorf("%s: the chart's value is %v, the executor read %v", path, want, got)
	}
}

// checkInvariants are what every value set must render.
func checkInvariants(t *testing.T, r rendered) {
	t.Helper()
	clusterScoped := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true,
		"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
	for _, o := range r.objs {
		if clusterScoped[o.GetKind()] != (o.GetNamespace() == "") {
			t.Errorf("%s %s: namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	dep := r.one(t, "Deployment", release_+"-controller-manager")
	pod := get(t, dep, "spec", "template").(map[string]any)
	podLabels, _, _ := unstructured.NestedStringMap(pod, "metadata", "labels")
	sa, _, _ := unstructured.NestedString(pod, "spec", "serviceAccountName")
	if sa == "" || len(r.find("ServiceAccount", sa)) != 1 {
		t.Errorf("the pod's service account %q is not rendered", sa)
	}
	containers, _, _ := unstructured.NestedSlice(pod, "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	if !slices.Contains(args, "--config=/etc/executor/config/config.yaml") {
		t.Errorf("args %v do not pass the configuration file", args)
	}
	ports := map[string]int64{}
	cports, _, _ := unstructured.NestedSlice(c, "ports")
	for _, p := range cports {
		pm := p.(map[string]any)
		ports[pm["name"].(string)] = toInt(pm["containerPort"])
	}
	// Restricted: the pod-level and container-level settings.
	for path, want := range map[string]any{
		"spec.securityContext.runAsNonRoot":                          true,
		"spec.securityContext.seccompProfile.type":                   "RuntimeDefault",
		"spec.containers.0.securityContext.allowPrivilegeEscalation": false,
		"spec.containers.0.securityContext.readOnlyRootFilesystem":   true,
	} {
		if got := dig(pod, path); !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s = %v, want %v", path, got, want)
		}
	}
	// Every Service selects the pod and targets a port it has.
	for _, svc := range r.find("Service", "") {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the pod does not have", svc.GetName(), k, v)
			}
		}
		sports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range sports {
			tp := p.(map[string]any)["targetPort"]
			if _, ok := ports[tp.(string)]; !ok {
				t.Errorf("Service %s targets port %v, which the container does not have (%v)", svc.GetName(), tp, ports)
			}
		}
	}
	// Every webhook calls a rendered Service.
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, wc := range r.find(kind, "") {
			hooks, _, _ := unstructured.NestedSlice(wc.Object, "webhooks")
			for _, h := range hooks {
				name, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "name")
				ns, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace")
				if len(r.find("Service", name)) != 1 || ns != releaseNS {
					t.Errorf("%s %s calls Service %s/%s, which is not rendered", kind, wc.GetName(), ns, name)
				}
			}
		}
	}
	// Every role is bound to the executor's service account (the metrics reader is for scrapers).
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, role := range r.find(kind, "") {
			if strings.HasSuffix(role.GetName(), "-metrics-reader") {
				continue
			}
			if !bound(r, kind, role.GetNamespace(), role.GetName(), sa) {
				t.Errorf("%s %s/%s is bound to no subject %s", kind, role.GetNamespace(), role.GetName(), sa)
			}
		}
	}
}

func bound(r rendered, kind, ns, name, sa string) bool {
	bkind := map[string]string{"Role": "RoleBinding", "ClusterRole": "ClusterRoleBinding"}[kind]
	for _, b := range r.find(bkind, "") {
		if b.GetNamespace() != ns {
			continue
		}
		ref, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		subs, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		for _, s := range subs {
			sm := s.(map[string]any)
			if ref == name && sm["name"] == sa && sm["namespace"] == releaseNS {
				return true
			}
		}
	}
	return false
}

func dig(m map[string]any, path string) any {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := int(p[0] - '0')
			if i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func toInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	case int:
		return int64(v)
	}
	return -1
}

// The default install: two replicas with leader election, spread over nodes,
// a disruption budget, probes on healthProbeBindAddress's port, metrics on
// metricsBindAddress's, the self-managed webhook certificate.
func TestDefaults(t *testing.T) {
	r := render(t, nil)
	dep := r.one(t, "Deployment", release_+"-controller-manager")
	if got := toInt(get(t, dep, "spec", "replicas")); got != 2 {
		t.Errorf("replicas %d, want 2", got)
	}
	_, cfg := r.configFile(t)
	if !cfg.LeaderElect || !cfg.Webhook.Enabled || cfg.WebhookCertPath != "" {
		t.Errorf("leaderElect %v, webhook.enabled %v, webhookCertPath %q: want true, true, empty", cfg.LeaderElect, cfg.Webhook.Enabled, cfg.WebhookCertPath)
	}
	pod := get(t, dep, "spec", "template", "spec").(map[string]any)
	if tsc, _ := pod["topologySpreadConstraints"].([]any); len(tsc) != 2 {
		t.Errorf("topologySpreadConstraints %v, want hostname and zone", pod["topologySpreadConstraints"])
	}
	for path, want := range map[string]any{
		"containers.0.livenessProbe.httpGet.path":  "/healthz",
		"containers.0.readinessProbe.httpGet.path": "/readyz",
		"containers.0.ports.0.containerPort":       int64(8443),
		"containers.0.ports.1.containerPort":       int64(8081),
		"containers.0.ports.2.containerPort":       int64(9443),
		"containers.0.image":                       "ghcr.io/taskaction/executor:0.1.0",
	} {
		got := dig(pod, path)
		if f, ok := got.(float64); ok {
			got = int64(f)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pod spec %s = %v, want %v", path, got, want)
		}
	}
	pdb := r.one(t, "PodDisruptionBudget", release_+"-controller-manager")
	if toInt(get(t, pdb, "spec", "maxUnavailable")) != 1 {
		t.Errorf("PodDisruptionBudget %v", pdb.Object["spec"])
	}
	if len(r.find("Certificate", "")) != 0 || len(r.find("ServiceMonitor", "")) != 0 {
		t.Error("cert-manager or Prometheus objects rendered by default")
	}
	// The webhook objects carry the names the executor's configuration gives them.
	w := cfg.Webhook
	r.one(t, "Service", w.ServiceName)
	r.one(t, "MutatingWebhookConfiguration", w.MutatingConfigName)
	r.one(t, "ValidatingWebhookConfiguration", w.ValidatingConfigName)
	// An image digest pins the image.
	pinned := render(t, vals(t, "image: {digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}"))
	img := dig(get(t, pinned.one(t, "Deployment", release_+"-controller-manager"), "spec", "template", "spec").(map[string]any), "containers.0.image")
	if img != "ghcr.io/taskaction/executor@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("image with a digest: %v", img)
	}
}

// With cert-manager: its Issuer and Certificate for the webhook Service's
// names, the Secret mounted where the configuration's webhookCertPath points,
// the CA injected into both configurations, and no RBAC for the executor's
// own certificate management.
func TestCertManager(t *testing.T) {
	r := render(t, vals(t, "webhook: {certManager: {enabled: true}}"))
	_, cfg := r.configFile(t)
	if cfg.WebhookCertPath != "/etc/executor/webhook-certs" {
		t.Fatalf("webhookCertPath %q", cfg.WebhookCertPath)
	}
	cert := r.one(t, "Certificate", release_+"-webhook-serving-cert")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	svc := cfg.Webhook.ServiceName + "." + releaseNS + ".svc"
	if !slices.Contains(dns, svc) {
		t.Errorf("dnsNames %v lack %s, the name the API server calls", dns, svc)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	r.one(t, "Issuer", issuer)
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	pod := get(t, r.one(t, "Deployment", release_+"-controller-manager"), "spec", "template", "spec").(map[string]any)
	mounted := false
	for _, v := range pod["volumes"].([]any) {
		vm := v.(map[string]any)
		if dig(vm, "secret.secretName") == secret {
			for _, m := range dig(pod, "containers.0.volumeMounts").([]any) {
				mm := m.(map[string]any)
				if mm["name"] == vm["name"] && mm["mountPath"] == cfg.WebhookCertPath {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("Secret %s is not mounted at %s", secret, cfg.WebhookCertPath)
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, wc := range r.find(kind, "") {
			if got := wc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != releaseNS+"/"+cert.GetName() {
				t.Errorf("%s inject-ca-from %q", kind, got)
			}
		}
	}
	for _, tu := range tuples(r.objs) {
		if tu.resource == "secrets" || strings.HasPrefix(tu.group, "admissionregistration") {
			t.Errorf("RBAC grants %+v, which the executor does not use with cert-manager", tu)
		}
	}
	// An existing issuer replaces the chart's own.
	r2 := render(t, vals(t, "webhook: {certManager: {enabled: true, issuerRef: {kind: ClusterIssuer, name: corp-ca}}}"))
	if len(r2.find("Issuer", "")) != 0 {
		t.Error("an Issuer is rendered although issuerRef names one")
	}
	if got := dig(r2.one(t, "Certificate", "").Object, "spec.issuerRef.name"); got != "corp-ca" {
		t.Errorf("issuerRef.name %v", got)
	}
}

// With config.executor.namespaces the executor's rights on TaskActions, pods
// and events are Roles in those namespaces only, and its webhooks are called
// for those namespaces only. Applied for real, the API server's authorizer
// agrees: allowed in team-a, refused in any other namespace.
func TestNamespaced(t *testing.T) {
	r := render(t, vals(t, "config: {executor: {namespaces: [team-a, team-b]}}"))
	cluster := tuples(r.objs)
	for _, tu := range cluster {
		if tu.scope == "cluster" && !clusterOnly(tu) {
			t.Errorf("cluster-wide %+v in namespaced mode", tu)
		}
	}
	def := tuples(render(t, nil).objs)
	var workload []tuple
	for _, tu := range def {
		if tu.scope == "cluster" && !clusterOnly(tu) {
			workload = append(workload, tu)
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		var got []tuple
		for _, tu := range cluster {
			if tu.scope == ns {
				tu.scope = "cluster"
				got = append(got, tu)
			}
		}
		if !reflect.DeepEqual(sortTuples(got), sortTuples(workload)) {
			t.Errorf("Role in %s grants %v, want %v", ns, got, workload)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		wc := r.one(t, kind, "")
		hooks, _, _ := unstructured.NestedSlice(wc.Object, "webhooks")
		for _, h := range hooks {
			got := dig(h.(map[string]any), "namespaceSelector.matchExpressions.0.values")
			if !reflect.DeepEqual(got, []any{"team-a", "team-b"}) {
				t.Errorf("%s %v: namespaceSelector values %v", kind, h.(map[string]any)["name"], got)
			}
		}
	}

	var rbac []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetObjectKind().GroupVersionKind().Group == "rbac.authorization.k8s.io" {
			rbac = append(rbac, o)
		}
	}
	apply(t, rbac)
	user := "system:serviceaccount:" + releaseNS + ":" + release_ + "-controller-manager"
	for _, c := range []struct {
		ns, verb, group, resource, sub, name string
		allowed                              bool
	}{
		{"team-a", "list", "flyte.org", "taskactions", "", "", true},
		{"team-b", "create", "", "pods", "", "", true},
		{"team-a", "patch", "flyte.org", "taskactions", "status", "", true},
		{"team-c", "list", "flyte.org", "taskactions", "", "", false},
		{"", "list", "flyte.org", "taskactions", "", "", false},
		{"flyte", "create", "", "pods", "", "", false},
		{"team-a", "update", "flyte.org", "taskactions", "", "", false},
		{releaseNS, "update", "coordination.k8s.io", "leases", "", "", true},
		{releaseNS, "get", "", "secrets", "", "executor-webhook-cert", true},
		{releaseNS, "get", "", "secrets", "", "other", false},
		{"team-a", "list", "", "secrets", "", "", false},
		{"", "patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "executor-mutating-webhook-configuration", true},
		{"", "patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "someone-elses", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNS, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.ns, Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub, Name: c.name,
			},
		}}
		if err := env.Client.Create(context.Background(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.allowed {
			t.Errorf("%s %s.%s/%s %q in %q: allowed %v, want %v", c.verb, c.resource, c.group, c.sub, c.name, c.ns, sar.Status.Allowed, c.allowed)
		}
	}
}

// clusterOnly are the permissions that cannot be namespaced: on the
// executor's webhook configurations, the metrics server's reviews, /metrics.
func clusterOnly(tu tuple) bool {
	return tu.url != "" || tu.group == "admissionregistration.k8s.io" ||
		tu.group == "authentication.k8s.io" || tu.group == "authorization.k8s.io"
}

// tuple is one permission: a verb on a resource (or a non-resource URL) in a scope.
type tuple struct {
	scope, group, resource, name, verb, url string
}

// tuples expands the rules of every Role and ClusterRole into single
// permissions, so that two ways of grouping the same rules compare equal.
// Roles in the executor's own namespace have scope "own".
func tuples(objs []*unstructured.Unstructured) []tuple {
	var out []tuple
	for _, o := range objs {
		scope := "cluster"
		switch o.GetKind() {
		case "ClusterRole":
		case "Role":
			scope = o.GetNamespace()
			if scope == releaseNS || scope == "system" {
				scope = "own"
			}
		default:
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rm := r.(map[string]any)
			list := func(k string) []string {
				s, _, _ := unstructured.NestedStringSlice(rm, k)
				if len(s) == 0 {
					return []string{""}
				}
				return s
			}
			for _, verb := range list("verbs") {
				for _, url := range list("nonResourceURLs") {
					if url != "" {
						out = append(out, tuple{scope: scope, url: url, verb: verb})
						continue
					}
					for _, g := range list("apiGroups") {
						for _, res := range list("resources") {
							for _, n := range list("resourceNames") {
								out = append(out, tuple{scope, g, res, n, verb, ""})
							}
						}
					}
				}
			}
		}
	}
	return sortTuples(out)
}

func sortTuples(ts []tuple) []tuple {
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		return strings.Join([]string{a.scope, a.group, a.resource, a.name, a.verb, a.url}, "\x00") <
			strings.Join([]string{b.scope, b.group, b.resource, b.name, b.verb, b.url}, "\x00")
	})
	return slices.Compact(ts)
}

// The chart's RBAC with default values is exactly config/rbac's: the
// controller-gen generated role.yaml (cluster and namespaced rules), the
// leader-election Role and the metrics roles, permission by permission.
func TestRBACMatchesConfigRBAC(t *testing.T) {
	var want []*unstructured.Unstructured
	for _, f := range []string{"role.yaml", "leader_election_role.yaml", "metrics_auth_role.yaml", "metrics_reader_role.yaml"} {
		want = append(want, readObjects(t, "../../config/rbac/"+f)...)
	}
	got := tuples(render(t, nil).objs)
	w := tuples(want)
	if !reflect.DeepEqual(got, w) {
		for _, tu := range w {
			if !slices.Contains(got, tu) {
				t.Errorf("config/rbac grants %+v, the chart does not", tu)
			}
		}
		for _, tu := range got {
			if !slices.Contains(w, tu) {
				t.Errorf("the chart grants %+v, config/rbac does not", tu)
			}
		}
	}
}

// The chart's CRD is config/crd/bases' (what `make manifests` generates): its
// copy in the chart is byte-identical, and the rendered object differs only by
// the chart's labels and the keep policy.
func TestCRDInSync(t *testing.T) {
	const base = "../../config/crd/bases/flyte.org_taskactions.yaml"
	src, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(chartDir + "/files/crds/flyte.org_taskactions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, cp) {
		t.Fatalf("charts/executor/files/crds/flyte.org_taskactions.yaml differs from %s: run `make manifests` (it copies it)", base)
	}
	want := readObjects(t, base)[0]
	got := render(t, nil).one(t, "CustomResourceDefinition", "taskactions.flyte.org").DeepCopy()
	if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Error("the CRD lacks helm.sh/resource-policy: keep (an uninstall would delete every TaskAction)")
	}
	ann := got.GetAnnotations()
	delete(ann, "helm.sh/resource-policy")
	got.SetAnnotations(ann)
	got.SetLabels(nil)
	if !reflect.DeepEqual(normalizeJSON(t, got.Object), normalizeJSON(t, want.Object)) {
		t.Error("the rendered CRD differs from config/crd/bases beyond labels and the keep annotation")
	}
	if len(render(t, vals(t, "crds: {install: false}")).find("CustomResourceDefinition", "")) != 0 {
		t.Error("crds.install=false still renders the CRD")
	}
}

// normalizeJSON round-trips through JSON so that number types agree.
func normalizeJSON(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Values the executor cannot judge, because they are about the chart's
// objects, are refused at install with a message naming them.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct{ values, want string }{
		{"config: {executor: {webhook: {namespace: other}}}", "config.executor.webhook.namespace"},
		{"config: {executor: {leaderElect: false}}", "leaderElect"},
		{"config: {executor: {webhook: {mutatingConfigName: ''}}}", "mutatingConfigName"},
		{"config: {executor: {metricsBindAddress: 'localhost'}}", "has no port"},
	} {
		_, err := renderErr(t, vals(t, c.values))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.values, err, c.want)
		}
	}
	// A single replica without leader election is fine.
	render(t, vals(t, "replicas: 1\nconfig: {executor: {leaderElect: false}}"))
}

// Every key of the executor's configuration has a value in values.yaml's
// config:, so that a setting is set in the chart under the name it has in the
// file: every flag BindFlags registers (--executor.<key>), every key
// `executor config` prints, and the keys the executor reads from Flyte's
// sections (storage, plugins.logs, plugins.k8s, tasks.task-plugins).
func TestValuesCoverEveryConfigKey(t *testing.T) {
	cfg, _, _ := unstructured.NestedMap(chartValues(t), "config")
	has := func(path string) bool {
		var cur any = cfg
		for _, p := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if cur, ok = m[p]; !ok {
				return false
			}
		}
		return true
	}
	keys := map[string]bool{}
	for _, k := range configKeys() {
		keys[k] = true
	}
	d := config.Default()
	printed, err := d.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(printed, &tree); err != nil {
		t.Fatal(err)
	}
	leaves("", tree, keys)
	if u := unmappedSections(); len(u) > 0 {
		t.Errorf("config.Config reads Flyte sections this test does not know: %v (add them to flyteSections and to values.yaml)", u)
	}
	for _, k := range flyteSectionKeys() {
		keys[k] = true
	}
	if len(keys) < 60 {
		t.Fatalf("only %d keys found: the walk is broken", len(keys))
	}
	for k := range keys {
		if !has(k) {
			t.Errorf("config key %s has no value in charts/executor/values.yaml config:", k)
		}
	}
	// And nothing in config.executor that is not a key (the executor would refuse it).
	var extra []string
	leafSet := map[string]bool{}
	leaves("", map[string]any{"executor": cfg["executor"]}, leafSet)
	for k := range leafSet {
		if !keys[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		t.Errorf("values.yaml config: has keys the executor does not have: %v", extra)
	}
}

func leaves(prefix string, v any, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || prefix == "executor.podSecurity.allowedServiceAccounts" {
		out[prefix] = true
		return
	}
	for k, e := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leaves(p, e, out)
	}
}
