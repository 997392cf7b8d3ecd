package container

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/podsecurity"
)

// stubClient answers Create, Get and Delete from its fields; any other call
// panics (the embedded interface is nil), which keeps the tests honest about
// what the plugin does.
type stubClient struct {
	client.Client
	createErr error
	pods      map[string]*corev1.Pod // by name, what Get returns
	getErr    error
	deleteErr error

	created []*corev1.Pod
	deleted []*client.DeleteOptions
}

func (s *stubClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	s.created = append(s.created, obj.(*corev1.Pod))
	return s.createErr
}

func (s *stubClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if s.getErr != nil {
		return s.getErr
	}
	p, ok := s.pods[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
	}
	p.DeepCopyInto(obj.(*corev1.Pod))
	return nil
}

func (s *stubClient) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := &client.DeleteOptions{}
	o.ApplyOptions(opts)
	s.deleted = append(s.deleted, o)
	return s.deleteErr
}

var podGR = schema.GroupResource{Resource: "pods"}

func ownedPod(uid types.UID, mut ...func(*corev1.Pod)) *corev1.Pod {
	t := true
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "act-0", Namespace: "ns", UID: "pod-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: "act", UID: uid, Controller: &t}}}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func beingDeleted(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }

func TestCreateError(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		code      string // "" : a plain error
		retryable bool
	}{
		{"invalid (422)", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Invalid(field.NewPath("spec", "restartPolicy"), "Sometimes", "bad")}), plugin.CodeInvalidResource, false},
		{"bad request", apierrors.NewBadRequest("nope"), plugin.CodeBadRequest, false},
		{"bare 400", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 400}}, plugin.CodeBadRequest, false},
		{"entity too large (413)", apierrors.NewRequestEntityTooLargeError("limit is 3MB"), plugin.CodeEntityTooLarge, false},
		{"bare 422", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422}}, plugin.CodeInvalidResource, false},
		{"quota (403)", apierrors.NewForbidden(podGR, "p", errors.New(`exceeded quota: compute, requested: cpu=2, used: cpu=9, limited: cpu=10`)), plugin.CodeQuotaExceeded, true},
		{"forbidden (403)", apierrors.NewForbidden(podGR, "p", errors.New("violates PodSecurity")), plugin.CodeForbidden, true},
		{"internal", apierrors.NewInternalError(errors.New("etcd")), "", false},
		{"server timeout", apierrors.NewServerTimeout(podGR, "create", 1), "", false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), "", false},
		{"context deadline", context.DeadlineExceeded, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := plugin.CreateError("pod ns/p", tc.err)
			var le *plugin.LaunchError
			if tc.code == "" {
				if errors.As(got, &le) {
					t.Fatalf("got LaunchError %+v, want a plain error", le)
				}
				if !errors.Is(got, tc.err) {
					t.Errorf("error %v does not wrap %v", got, tc.err)
				}
				return
			}
			if !errors.As(got, &le) {
				t.Fatalf("got %v, want a LaunchError", got)
			}
			if le.Err.Code != tc.code || le.Retryable != tc.retryable || le.Err.Kind != flytev1.ErrorKindUser || !strings.Contains(le.Err.Message, "ns/p") {
				t.Errorf("got %+v (retryable %v), want code %s retryable %v USER", le.Err, le.Retryable, tc.code, tc.retryable)
			}
		})
	}
}

func TestLaunch(t *testing.T) {
	exists := apierrors.NewAlreadyExists(podGR, "act-0")
	cases := []struct {
		name     string
		c        *stubClient
		wantCode string // LaunchError code
		wantIs   error  // plain error wrapping this
		wantNil  bool
	}{
		{name: "created", c: &stubClient{}, wantNil: true},
		{name: "exists and ours", c: &stubClient{createErr: exists, pods: map[string]*corev1.Pod{"act-0": ownedPod("uid-1")}}, wantNil: true},
		{name: "exists, ours, terminating", c: &stubClient{createErr: exists, pods: map[string]*corev1.Pod{"act-0": ownedPod("uid-1", beingDeleted)}}, wantIs: plugin.ErrResourceTerminating},
		{name: "exists, earlier TaskAction of that name", c: &stubClient{createErr: exists, pods: map[string]*corev1.Pod{"act-0": ownedPod("old-uid")}}, wantIs: plugin.ErrResourceTerminating},
		{name: "exists, someone else's", c: &stubClient{createErr: exists, pods: map[string]*corev1.Pod{"act-0": {ObjectMeta: metav1.ObjectMeta{Name: "act-0", Namespace: "ns"}}}}, wantCode: plugin.CodeAlreadyExists},
		{name: "exists, not readable yet", c: &stubClient{createErr: exists}, wantIs: nil},
		{name: "quota", c: &stubClient{createErr: apierrors.NewForbidden(podGR, "act-0", errors.New("exceeded quota: q"))}, wantCode: plugin.CodeQuotaExceeded},
		{name: "transient", c: &stubClient{createErr: apierrors.NewServiceUnavailable("later")}, wantIs: nil},
	}
	p := New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Launch(context.Background(), tc.c, plugin.TaskContext{TaskAction: testTA(), Attempt: 1})
			var le *plugin.LaunchError
			switch {
			case tc.wantNil:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			case tc.wantCode != "":
				if !errors.As(err, &le) || le.Err.Code != tc.wantCode {
					t.Fatalf("err = %v, want LaunchError %s", err, tc.wantCode)
				}
			default:
				if err == nil || errors.As(err, &le) {
					t.Fatalf("err = %v, want a plain error", err)
				}
				if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("err = %v, want it to wrap %v", err, tc.wantIs)
				}
			}
			if len(tc.c.created) != 1 || tc.c.created[0].Name != "act-0" {
				t.Errorf("created = %v", tc.c.created)
			}
		})
	}
	// A task that cannot become a pod never reaches the API server.
	c := &stubClient{}
	ta := testTA()
	ta.Spec.Template.Container = nil
	err := p.Launch(context.Background(), c, plugin.TaskContext{TaskAction: ta, Attempt: 1})
	var le *plugin.LaunchError
	if !errors.As(err, &le) || le.Err.Code != CodeBadTaskSpecification || len(c.created) != 0 {
		t.Errorf("err = %v, created %d", err, len(c.created))
	}
}

func TestObserve(t *testing.T) {
	p := &Plugin{Now: func() time.Time { return t0 }}
	tc := plugin.TaskContext{TaskAction: testTA(), Attempt: 1}
	running := ownedPod("uid-1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	cases := []struct {
		name  string
		c     *stubClient
		phase plugin.Phase
		err   bool
	}{
		{"not found", &stubClient{}, plugin.PhaseNotStarted, false},
		{"ours", &stubClient{pods: map[string]*corev1.Pod{"act-0": running}}, plugin.PhaseRunning, false},
		{"not ours", &stubClient{pods: map[string]*corev1.Pod{"act-0": ownedPod("old-uid", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })}}, plugin.PhaseNotStarted, false},
		{"read error", &stubClient{getErr: apierrors.NewServiceUnavailable("x")}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obs, err := p.Observe(context.Background(), c.c, tc)
			if (err != nil) != c.err || obs.Phase != c.phase {
				t.Errorf("Observe = %+v, %v; want phase %q, error %v", obs, err, c.phase, c.err)
			}
		})
	}
}

// TestPluginNeverDeletes: the reconciler alone deletes an attempt's pod, and
// only exactly the pod it observed (UID precondition). The plugin has no
// Abort (it deleted by name when the pod was not in the cache, so it could
// remove a successor of the same name), and none of its methods deletes.
func TestPluginNeverDeletes(t *testing.T) {
	p := New()
	if _, ok := any(p).(interface {
		Abort(context.Context, client.Client, plugin.TaskContext) error
	}); ok {
		t.Error("the container plugin has an Abort method: pods are deleted by the reconciler, with a UID precondition")
	}
	tc := plugin.TaskContext{TaskAction: testTA(), Attempt: 1, Now: t0}
	for _, c := range []*stubClient{
		{},
		{pods: map[string]*corev1.Pod{"act-0": ownedPod("uid-1")}},
		{pods: map[string]*corev1.Pod{"act-0": ownedPod("other")}},
		{createErr: apierrors.NewAlreadyExists(podGR, "act-0"), pods: map[string]*corev1.Pod{"act-0": ownedPod("uid-1", beingDeleted)}},
	} {
		_ = p.Launch(context.Background(), c, tc)
		_, _ = p.Observe(context.Background(), c, tc)
		_ = p.Finalize(context.Background(), c, tc)
		if len(c.deleted) != 0 {
			t.Errorf("the plugin deleted a pod (%d deletes)", len(c.deleted))
		}
	}
}

func TestPluginBasics(t *testing.T) {
	p := New()
	if p.ID() != "container" {
		t.Errorf("ID = %q", p.ID())
	}
	if got := strings.Join(p.TaskTypes(), ","); got != "container,python,python-task,raw-container,sidecar" {
		t.Errorf("TaskTypes = %s", got)
	}
	if got := p.ResourceName(plugin.TaskContext{TaskAction: testTA(), Attempt: 3}); got != "act-2" {
		t.Errorf("ResourceName = %q", got)
	}
	if w := p.WatchedTypes(); len(w) != 1 {
		t.Errorf("WatchedTypes = %v", w)
	} else if _, ok := w[0].(*corev1.Pod); !ok {
		t.Errorf("WatchedTypes = %T", w[0])
	}
	if err := p.Finalize(context.Background(), nil, plugin.TaskContext{}); err != nil {
		t.Errorf("Finalize = %v", err)
	}
	reg := plugin.NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	if got, err := reg.Resolve("python-task"); err != nil || got.ID() != "container" {
		t.Errorf("Resolve = %v, %v", got, err)
	}
}

// A pod template that names its service account only through the deprecated
// alias spec.serviceAccount runs as that account (the API server copies the
// alias into an empty serviceAccountName): podSecurity.allowedServiceAccounts
// must refuse it as it refuses serviceAccountName. The built pod names the
// account it runs as in serviceAccountName alone (the alias is cleared), by
// the same precedence: the template's runAs, else the pod spec's account
// (either field, serviceAccountName first), else the executor's default.
func TestServiceAccountAliasIsPolicyChecked(t *testing.T) {
	pol, err := podsecurity.New("privileged", map[string][]string{"ns": {"runner"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, runAs, spec, alias, def string
		want                          string // "": refused
	}{
		{name: "alias of a forbidden account", alias: "namespace-admin"},
		{name: "alias of a forbidden account over the executor's allowed default", def: "runner", alias: "namespace-admin"},
		{name: "alias of an allowed account", alias: "runner", want: "runner"},
		{name: "serviceAccountName wins over the alias, as in the API server", spec: "runner", alias: "namespace-admin", want: "runner"},
		{name: "runAs wins over a spec copied from a pod (both fields set)", runAs: "runner", spec: "namespace-admin", alias: "namespace-admin", want: "runner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			if tc.runAs != "" {
				ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{RunAs: &flytev1.RunAs{K8sServiceAccount: tc.runAs}}
			}
			setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{ServiceAccountName: tc.spec, DeprecatedServiceAccount: tc.alias})
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: 1,
				Settings: plugin.Settings{PodSecurity: pol, DefaultServiceAccount: tc.def}})
			var le *plugin.LaunchError
			if tc.want == "" {
				if !errors.As(err, &le) || le.Err.Code != CodePodSecurityViolation || !strings.Contains(le.Err.Message, `"namespace-admin"`) {
					t.Fatalf("BuildPod = %v; want a %s naming namespace-admin", err, CodePodSecurityViolation)
				}
				return
			}
			if err != nil {
				t.Fatalf("BuildPod: %v", err)
			}
			if pod.Spec.ServiceAccountName != tc.want || pod.Spec.DeprecatedServiceAccount != "" {
				t.Errorf("serviceAccountName %q, serviceAccount %q; want %q and none", pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount, tc.want)
			}
		})
	}
}
