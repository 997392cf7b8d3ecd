package cache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/storage"
)

func template(discoverable bool, inputs ...string) *core.TaskTemplate {
	return &core.TaskTemplate{
		Id:        &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf.square", Version: "v1"},
		Metadata:  &core.TaskMetadata{Discoverable: discoverable, DiscoveryVersion: "1"},
		Interface: iface(inputs...),
	}
}

// Inputs in a file:// bucket decide the key: the same inputs find the entry
// a first run stored, other inputs do not.
func TestTaskKeyFromStoredInputs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, err := storage.New(config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"file://" + root}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	write := func(run string, n int64) string {
		uri := "file://" + root + "/" + run
		if err := st.WriteProtobuf(ctx, uri+"/inputs.pb", lits("n", intLit(n))); err != nil {
			t.Fatal(err)
		}
		return uri
	}
	first, second, third := write("r1", 3), write("r2", 3), write("r3", 4)
	c := cache.NewClient(cachesvctest.Start(t, cachesvctest.Options{}).URL, nil)
	tmpl := template(true, "n")

	k1, on, err := cache.TaskKey(ctx, st, tmpl, first, "cv")
	if err != nil || !on {
		t.Fatalf("first: %v %v", on, err)
	}
	if k1.Org != "" {
		t.Fatalf("org %q, want none for an identifier without one (as Flyte's executor scopes it)", k1.Org)
	}
	if e, err := c.Get(ctx, k1); err != nil || e != nil {
		t.Fatalf("first run: %v %v, want a miss", e, err)
	}
	if _, err := c.Put(ctx, k1, cache.Entry{OutputURI: first + "/1/outputs.pb", Task: tmpl.GetId()}); err != nil {
		t.Fatal(err)
	}
	k2, _, err := cache.TaskKey(ctx, st, tmpl, second+"/inputs.pb", "cv")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := c.Get(ctx, k2); err != nil || e == nil || e.OutputURI != first+"/1/outputs.pb" {
		t.Fatalf("same inputs: %v %v, want the first run's outputs", e, err)
	}
	k3, _, err := cache.TaskKey(ctx, st, tmpl, third, "cv")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := c.Get(ctx, k3); err != nil || e != nil {
		t.Fatalf("other inputs: %v %v, want a miss", e, err)
	}

	t.Run("not discoverable: no cache", func(t *testing.T) {
		if _, on, err := cache.TaskKey(ctx, st, template(false, "n"), first, "cv"); on || err != nil {
			t.Fatalf("%v %v", on, err)
		}
	})
	t.Run("no inputs declared: the inputs file is not read", func(t *testing.T) {
		tm := template(true)
		tm.Interface.Inputs = nil
		if _, on, err := cache.TaskKey(ctx, st, tm, "file://"+root+"/nowhere", "cv"); !on || err != nil {
			t.Fatalf("%v %v", on, err)
		}
	})
	t.Run("missing inputs are an error, not a key", func(t *testing.T) {
		_, on, err := cache.TaskKey(ctx, st, tmpl, "file://"+root+"/nowhere", "cv")
		if !on || !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("%v %v, want ErrNotFound", on, err)
		}
	})
}
