package chart

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The guide's switch, tried on a real API server: a controller-runtime manager
// set up as Flyte's executor sets up its own (leader election on, the Lease
// abf369a8.flyte.org in its namespace, a TaskAction controller), running as a
// service account with the flyte-binary chart's ClusterRole rules, which
// grant nothing on Leases. Its TaskAction cache syncs (what Flyte's actions
// service reads), its elector is refused the Lease again and again, and its
// controller never reconciles; once the account may use Leases, it does (so
// the test can tell the two apart).
func TestFlyteExecutorParkedWithoutLeaseRBAC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, sa = "flyte", "flyte-binary"
	user := "system:serviceaccount:" + ns + ":" + sa

	// flyte-binary's ClusterRole (charts/flyte-binary/templates/clusterrole.yaml at 6fadb90d65),
	// as rules: no coordination.k8s.io.
	all := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "flyte-binary-cluster-role"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"podtemplates"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: all},
		{APIGroups: []string{"flyte.org"}, Resources: []string{"taskactions", "taskactions/status", "taskactions/finalizers"}, Verbs: all},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, Verbs: []string{"create", "get", "list", "patch", "update", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: all},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flyte-binary-cluster-role"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}

	ta := readObjects(t, "../../config/samples/flyte_v1_taskaction_success.yaml")[0]
	ta.SetNamespace(ns)
	ta.SetName("parked")
	if err := env.Client.Create(ctx, ta); err != nil {
		t.Fatal(err)
	}

	// The manager runs as flyte-binary's service account; lease requests refused are counted.
	var leaseDenied atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && strings.Contains(r.URL.Path, "/leases") && resp.StatusCode == http.StatusForbidden {
				leaseDenied.Add(1)
			}
			return resp, err
		})
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "abf369a8.flyte.org",
		LeaderElectionNamespace: ns, // in a pod: its own namespace, flyte
		// Shorter than Flyte's defaults so that the tries come quickly; the logic is the same.
		LeaseDuration: ptr(3 * time.Second),
		RenewDeadline: ptr(2 * time.Second),
		RetryPeriod:   ptr(200 * time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "flyte.org", Version: "v1", Kind: "TaskAction"}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	var reconciled atomic.Int64
	if err := ctrl.NewControllerManagedBy(mgr).For(u).Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		reconciled.Add(1)
		return reconcile.Result{}, nil
	})); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		<-done
	}()

	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the TaskAction cache did not sync")
	}
	// Each refusal is one whole try of the elector; after three, the controller
	// would have started had the manager been able to lead.
	waitFor(t, ctx, "three refused Lease requests", func() bool { return leaseDenied.Load() >= 3 })
	select {
	case err := <-done:
		t.Fatalf("the manager stopped: %v", err)
	default:
	}
	if n := reconciled.Load(); n != 0 {
		t.Fatalf("reconciled %d times without the Lease", n)
	}

	// The control: with Leases allowed, the same manager leads and reconciles.
	leases := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leases", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	lb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leases", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "leases"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	if err := env.Client.Create(ctx, leases); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "a reconcile once the Lease is allowed", func() bool { return reconciled.Load() > 0 })
}

func ptr[T any](v T) *T { return &v }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitFor polls cond until it holds; ctx's deadline bounds a failure only.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
