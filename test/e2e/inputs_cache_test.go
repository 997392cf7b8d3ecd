package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/protobuf/proto"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/task"
)

// discoverableTemplate is a Flyte-form template whose outputs are cached
// (metadata.discoverable) and whose interface declares one integer input.
func discoverableTemplate() *core.TaskTemplate {
	return &core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf.square", Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{Discoverable: true, DiscoveryVersion: "1"},
		Interface: &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{
			{Key: "x", Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "ghcr.io/flyteorg/py:v1", Args: []string{"--inputs", "{{.input}}"}}},
	}
}

func intInputs(x int64) *core.LiteralMap {
	return &core.LiteralMap{Literals: map[string]*core.Literal{"x": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: x}}}}}}}}
}

// storedInputs writes x as the inputs of action under the run's folder of
// the file:// bucket and returns the TaskAction that runs the cached task on them.
func storedInputs(t *testing.T, st *storage.Store, bucket, ns, run, action string, x *int64) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.Marshal(discoverableTemplate())
	if err != nil {
		t.Fatal(err)
	}
	inputURI := bucket + "/proj/dev/" + run + "/" + action
	if x != nil {
		if err := st.WriteProtobuf(context.Background(), inputURI+"/"+layout.InputsFile, intInputs(*x)); err != nil {
			t.Fatal(err)
		}
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: run + "-" + action, Namespace: ns},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "proj", Domain: "dev", ActionName: action, TaskType: "python", ShortName: "square",
			InputURI: inputURI, RunOutputBase: bucket + "/proj/dev/" + run + "/", CacheKey: "cache-v1", TaskTemplate: b,
		},
	}
}

// TestCacheKeyCoversInputs: a Flyte-form task whose inputs are a real
// serialized LiteralMap in a file:// bucket. The first run misses and
// populates the cache; a second with the same inputs (another action, another
// file) is a hit without a pod; a third with other inputs misses and runs. An
// inputs file that cannot be read is a system failure, not a hang.
func TestCacheKeyCoversInputs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.New(local.StorageConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	bucket := local.BucketURI(dir)
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	cs := cachesvctest.Start(t, cachesvctest.Options{})
	ns := namespace(t)
	startExecutorWith(t, ns, ev.URL, cs.URL, func(c *config.Config) { c.Storage = local.StorageConfig(dir) })
	cc := cache.NewClient(cs.URL, nil)
	run := "rin"
	two, three := int64(2), int64(3)

	first := storedInputs(t, st, bucket, ns, run, "a1", &two)
	create(t, first)
	pod := waitPod(t, ns, first.Name+"-0")
	if ta := waitReason(t, ns, first.Name, flytev1.ConditionProgressing, flytev1.ReasonQueued); ta.Status.CacheStatus != flytev1.CacheMiss {
		t.Fatalf("first: cacheStatus %q, want MISS", ta.Status.CacheStatus)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	ta := waitReason(t, ns, first.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CachePopulated {
		t.Fatalf("first: cacheStatus %q, want POPULATED", ta.Status.CacheStatus)
	}
	key, enabled, err := cache.TaskKey(ctx, st, discoverableTemplate(), first.Spec.InputURI, "cache-v1")
	if err != nil || !enabled {
		t.Fatal(enabled, err)
	}
	e, err := cc.Get(ctx, key)
	if err != nil || e == nil || e.OutputURI != task.OutputURI(ta, 1) || e.Source.Action != "a1" || e.Task.GetName() != "wf.square" {
		t.Fatalf("cache entry under the inputs' key = %+v, %v", e, err)
	}

	second := storedInputs(t, st, bucket, ns, run, "a2", &two)
	create(t, second)
	ta = waitReason(t, ns, second.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CacheHit || podCount(t, ns) != 1 {
		t.Fatalf("second (same inputs): cacheStatus %q, pods %d; want HIT and no new pod", ta.Status.CacheStatus, podCount(t, ns))
	}
	evs, _ := stored(t, ev.Store, run, "a2")
	if n := len(evs); n == 0 || evs[n-1].CacheSource == nil || evs[n-1].CacheSource.Action != "a1" {
		t.Fatalf("second: the HIT event names no source attempt: %+v", evs)
	}

	third := storedInputs(t, st, bucket, ns, run, "a3", &three)
	create(t, third)
	waitPod(t, ns, third.Name+"-0")
	if ta := waitReason(t, ns, third.Name, flytev1.ConditionProgressing, flytev1.ReasonQueued); ta.Status.CacheStatus != flytev1.CacheMiss {
		t.Fatalf("third (other inputs): cacheStatus %q, want MISS", ta.Status.CacheStatus)
	}

	missing := storedInputs(t, st, bucket, ns, run, "a4", nil)
	create(t, missing)
	eventually(t, 30*time.Second, "a storage error recorded for the unreadable inputs", func() bool {
		es := get(t, ns, missing.Name).Status.ErrorState
		return es != nil && es.Code == "StorageError" && strings.Contains(es.Message, "inputs")
	})
	if ta := get(t, ns, missing.Name); ta.Status.SystemFailures == 0 || ta.Status.Attempts > 1 {
		t.Fatalf("unreadable inputs: systemFailures %d, attempts %d; want a counted system failure of attempt 1", ta.Status.SystemFailures, ta.Status.Attempts)
	}
}
