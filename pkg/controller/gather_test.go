package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"google.golang.org/protobuf/proto"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
)

// liveReader answers Gets as the API server would, and counts them.
type liveReader struct {
	exists bool
	gets   int
}

func (l *liveReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	l.gets++
	if l.exists {
		return nil
	}
	return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
}

func (l *liveReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestPodCacheBehind (issue 10, item 9, and the flaky extra GET of
// TestAPIRequestsPerTaskAction): a pod this process created and the cache does
// not show yet is waited for without a request until the pod informer has
// synced past the create; then the API server is asked once.
func TestPodCacheBehind(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "hello-0"}
	p := container.New()
	for _, tc := range []struct {
		name         string
		synced       string
		exists       bool
		want, second bool
		gets         int
	}{
		{"informer not past the create: wait, no request", "9", true, true, true, 0},
		{"past the create, pod gone: deleted", "11", false, false, false, 1},
		{"past the create, pod there: wait once, then trust the cache", "11", true, true, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := &liveReader{exists: tc.exists}
			r := &Reconciler{APIReader: live, memory: newProcessMemory(), objectsSynced: func() string { return tc.synced }}
			r.memory.objectCreates.wrote(key, "", "10")
			got, _, err := r.podCacheBehind(context.Background(), p, key, false)
			if err != nil || got != tc.want {
				t.Fatalf("behind = %v, %v; want %v", got, err, tc.want)
			}
			again, _, _ := r.podCacheBehind(context.Background(), p, key, false)
			if again != tc.second || live.gets != tc.gets {
				t.Errorf("second look: behind = %v after %d GETs; want %v after %d", again, live.gets, tc.second, tc.gets)
			}
		})
	}
	// Nothing created by this process: the cache is trusted.
	r := &Reconciler{memory: newProcessMemory()}
	if got, _, _ := r.podCacheBehind(context.Background(), p, key, false); got {
		t.Error("behind without a create")
	}
}

// The event of our create wakes no reconcile unless one waits for it; one
// that read the cache before that event arrived reads again, and if the pod
// is still missing then, the API server decides as after a synced informer.
func TestPodCacheBehindAfterTheCreateEvent(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "hello-0"}
	p := container.New()
	for _, exists := range []bool{true, false} {
		live := &liveReader{exists: exists}
		r := &Reconciler{APIReader: live, memory: newProcessMemory(), objectsSynced: func() string { return "9" }}
		r.memory.objectCreates.wrote(key, "", "10")
		if !r.memory.objectCreates.echo(key, "", "10") {
			t.Fatal("the event of our create, awaited by none, woke a reconcile")
		}
		behind, arrived, err := r.podCacheBehind(context.Background(), p, key, false)
		if err != nil || behind || !arrived || live.gets != 0 {
			t.Fatalf("read before the event: behind %v, arrived %v, %d GETs, %v; want read again, no request", behind, arrived, live.gets, err)
		}
		behind, _, err = r.podCacheBehind(context.Background(), p, key, true)
		if err != nil || behind != exists || live.gets != 1 {
			t.Errorf("read again, pod still missing (on the API server: %v): behind %v after %d GETs (%v); want %v after 1", exists, behind, live.gets, err, exists)
		}
	}
	// A reconcile that waits: the event wakes it.
	r := &Reconciler{memory: newProcessMemory(), objectsSynced: func() string { return "9" }}
	r.memory.objectCreates.wrote(key, "", "10")
	if behind, _, _ := r.podCacheBehind(context.Background(), p, key, false); !behind {
		t.Fatal("informer not past the create: not behind")
	}
	if r.memory.objectCreates.echo(key, "", "10") {
		t.Error("the event a waiting reconcile needs was dropped")
	}
}

// TestDuplicateRefusesTheOneThatHasNotStarted is issue 31, item 7: of two
// TaskActions of one action identity created in the same second, the one that
// already launched its pod and reported (its status held back) keeps running,
// whatever their names; the other is refused. It used to be decided by name,
// refusing the one that had reported and dropping the other's events as
// duplicates of its.
func TestDuplicateRefusesTheOneThatHasNotStarted(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	first, second := newTA(0), newTA(0)
	first.Name, first.UID = "a-first-by-name", "uid-a"
	second.Name, second.UID = "b-launched", "uid-b"
	for _, ta := range []*flytev1.TaskAction{first, second} {
		if err := r.store.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b-launched-0", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: flytev1.GroupVersion.String(), Kind: "TaskAction", Name: second.Name, UID: second.UID, Controller: ptrTo(true)}}}}
	if err := r.store.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	rec := &Reconciler{Client: r.store}
	p := container.New()
	if d, err := rec.duplicateOf(ctx, p, first, false); err != nil || d == nil || d.Name != "ns/b-launched" {
		t.Errorf("the one first by name, not started: duplicate of %+v (%v); want refused for ns/b-launched", d, err)
	}
	if d, err := rec.duplicateOf(ctx, p, second, true); err != nil || d != nil {
		t.Errorf("the one that launched: duplicate of %+v (%v); want it to keep running", d, err)
	}
	// Neither started: the name decides, the same way for both.
	if err := r.store.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if d, _ := rec.duplicateOf(ctx, p, first, false); d != nil {
		t.Errorf("neither started: the first by name refused (%+v)", d)
	}
	if d, _ := rec.duplicateOf(ctx, p, second, false); d == nil {
		t.Error("neither started: the second by name kept")
	}
}

// TestStorageOutsideTheConfiguredBucketsIsInvalid is issue 31, item 4: a task
// whose data the executor would read (Flyte's form; {{.Inputs.x}}) at a
// location its storage section does not allow fails as an invalid spec that
// names the URI, before anything is read; one that reads nothing (a typed
// task without {{.Inputs.x}}) may name any URI.
func TestStorageOutsideTheConfiguredBucketsIsInvalid(t *testing.T) {
	st, err := storage.New(config.StorageConfig{Type: config.StorageTypeLocal, Container: "bucket",
		Stow: config.StowConfig{Kind: config.StowKindLocal, Config: map[string]string{"path": t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	r := &Reconciler{Storage: st}
	flyte := func(input, output string) *flytev1.TaskAction {
		b, err := proto.Marshal(&core.TaskTemplate{Id: &core.Identifier{Name: "t", Version: "v"}, Type: "python",
			Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "img"}}})
		if err != nil {
			t.Fatal(err)
		}
		ta := newTA(0)
		ta.Spec.Template, ta.Spec.TaskTemplate, ta.Spec.TaskType = nil, b, "python"
		ta.Spec.InputURI, ta.Spec.RunOutputBase = input, output
		return ta
	}
	inside := "file://bucket/p/d/run1/"
	for _, tc := range []struct {
		name  string
		ta    *flytev1.TaskAction
		field string
	}{
		{"Flyte form, inputs in another bucket", flyte("s3://someone-elses/secrets", inside), "spec.inputUri"},
		{"Flyte form, outputs on the executor's filesystem", flyte(inside+"a0", "file:///etc/"), "spec.runOutputBase"},
		{"Flyte form, both in the bucket", flyte(inside+"a0", inside), ""},
		{"typed, reads nothing: any URI", newTA(0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := task.FromTaskAction(tc.ta)
			if err != nil {
				t.Fatal(err)
			}
			err = r.storageAllowed(tc.ta, tk, container.New())
			var fe *task.FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, storage.ErrLocationNotAllowed) && !strings.Contains(err.Error(), "not allowed")):
				t.Errorf("got %v; want %s refused, naming the location", err, tc.field)
			}
		})
	}
}

// A TaskAction refused as a duplicate reported nothing under the shared
// identity: it blocks nobody, even created in the same second, first by name.
func TestRefusedDuplicateBlocksNobody(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	refused, running := newTA(0), newTA(0)
	refused.Name, refused.UID = "a-refused", "uid-a"
	refused.Status.ErrorState = &flytev1.ErrorState{Code: CodeDuplicateAction, Kind: flytev1.ErrorKindUser}
	refused.Status.PhaseHistory = []flytev1.PhaseTransition{{Phase: flytev1.ReasonInvalidSpec}}
	refused.Status.Conditions = []metav1.Condition{{Type: flytev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: flytev1.ReasonInvalidSpec, LastTransitionTime: metav1.NewTime(t0)}}
	running.Name, running.UID = "b-running", "uid-b"
	for _, ta := range []*flytev1.TaskAction{refused, running} {
		if err := r.store.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
	}
	rec := &Reconciler{Client: r.store}
	if d, err := rec.duplicateOf(ctx, container.New(), running, true); err != nil || d != nil {
		t.Errorf("the running one is refused for %+v (%v)", d, err)
	}
}

// TestCacheVersionIsTheSpecsCacheKey: a Flyte-form task's cache version is
// spec.cacheKey as it is, empty too, as Flyte's executor keys it (it used to
// fall back on metadata.discovery_version, so the two executors' keys for
// the same TaskAction differed and neither hit the other's entries).
func TestCacheVersionIsTheSpecsCacheKey(t *testing.T) {
	b, err := proto.Marshal(&core.TaskTemplate{Id: &core.Identifier{Project: "p", Domain: "d", Name: "t", Version: "v"}, Type: "python",
		Metadata: &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "1"},
		Target:   &core.TaskTemplate_Container{Container: &core.Container{Image: "img"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Storage: errorDocStore{}}
	for _, version := range []string{"", "v7"} {
		ta := newTA(0)
		ta.Spec.Template, ta.Spec.TaskTemplate, ta.Spec.TaskType, ta.Spec.CacheKey = nil, b, "python", version
		tk, err := task.FromTaskAction(ta)
		if err != nil {
			t.Fatal(err)
		}
		k := r.inputsKey(context.Background(), ta, tk)
		if k.Err != nil || k.StorageErr != nil || !strings.HasSuffix(k.Key.Key, "-"+version) || strings.HasSuffix(k.Key.Key, "-1") {
			t.Errorf("spec.cacheKey %q: key %q (%v, %v); want it to end in -%s", version, k.Key.Key, k.Err, k.StorageErr, version)
		}
	}
}

// An engine plugin observes its object and may read pods (from the cache);
// it is served nothing else.
func TestObjectReaderServesTheObjectAndPods(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-0-worker-0"}}
	if err := r.store.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	job := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-0"}}
	o := objectReader{obj: job, pods: r.store}
	if err := o.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "job-0"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the attempt's object: %v", err)
	}
	if err := o.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "other"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("another object of its kind: %v, want not found", err)
	}
	if err := o.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil {
		t.Errorf("a pod: %v", err)
	}
	pl := &corev1.PodList{}
	if err := o.List(ctx, pl, client.InNamespace("ns")); err != nil || len(pl.Items) != 1 {
		t.Errorf("pods listed: %d, %v", len(pl.Items), err)
	}
	if err := o.List(ctx, &corev1.ConfigMapList{}); err == nil {
		t.Error("a list of another kind was served")
	}
}
