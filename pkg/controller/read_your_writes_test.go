package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// TestWriteOrder is issue 10, item 9: a cached copy is compared with our
// last write by resourceVersion order (numerically, not as strings), a newer
// copy is never held back, and nothing expires by time.
func TestReadYourWrites(t *testing.T) {
	o := newReadYourWrites()
	k := types.NamespacedName{Namespace: "n", Name: "a"}
	behind := func(rv string) bool { b, _ := o.behind(k, rv); return b }
	if behind("1") {
		t.Error("behind without a write")
	}
	for _, tc := range []struct {
		rv     string
		behind bool
	}{{"9", true}, {"2", true}, {"100", false}} {
		o.wrote(k, "1", "10")
		if got := behind(tc.rv); got != tc.behind {
			t.Errorf("cache at %s after our write at 10: behind = %v, want %v", tc.rv, got, tc.behind)
		}
	}
	o.wrote(k, "11", "12")
	o.wrote(k, "10", "11") // a response that arrives late does not move the mark back
	if !behind("11") || behind("12") {
		t.Error("the mark is the newest write")
	}
	if behind("11") {
		t.Error("once caught up, the entry is gone")
	}
	o.wrote(k, "11", "12")
	if behind("not-a-number") {
		t.Error("a version that cannot be ordered is trusted")
	}
	var nilOrder *readYourWrites
	nilOrder.wrote(k, "0", "1")
	if b, _ := nilOrder.behind(k, "0"); b || nilOrder.echo(k, "0", "1") {
		t.Error("a nil order holds nothing back and recognises no echo")
	}
}

// The watch event of our own write wakes nobody, unless a reconcile read an
// older copy and waits for it; a reconcile that read before the event arrived
// is told to read again. Events that carry anything beside our write (another
// writer's version in between, a watch that skipped versions) are no echo.
func TestReadYourWritesEcho(t *testing.T) {
	k := types.NamespacedName{Namespace: "n", Name: "a"}
	t.Run("unawaited echo is dropped, a late reader reads again", func(t *testing.T) {
		o := newReadYourWrites()
		o.wrote(k, "10", "11")
		if !o.echo(k, "10", "11") {
			t.Fatal("our own write's event not recognised")
		}
		if b, arrived := o.behind(k, "10"); !b || !arrived {
			t.Errorf("a copy read before the echo: behind %v, arrived %v; want both (read again)", b, arrived)
		}
		if b, _ := o.behind(k, "11"); b {
			t.Error("the copy read again is current")
		}
	})
	t.Run("awaited echo wakes the waiter", func(t *testing.T) {
		o := newReadYourWrites()
		o.wrote(k, "10", "11")
		if b, arrived := o.behind(k, "10"); !b || arrived {
			t.Fatalf("behind %v, arrived %v; want behind, not arrived", b, arrived)
		}
		if o.echo(k, "10", "11") {
			t.Error("the event a reconcile waits for was dropped")
		}
	})
	t.Run("not an echo", func(t *testing.T) {
		for _, tc := range []struct{ name, old, new string }{
			{"another writer in between", "10", "12"},
			{"a watch that skipped versions", "9", "11"},
			{"another writer's later event", "11", "12"},
			{"a resync", "11", "11"},
		} {
			o := newReadYourWrites()
			o.wrote(k, "10", "11")
			if o.echo(k, tc.old, tc.new) {
				t.Errorf("%s (%s → %s) taken for our write 10 → 11", tc.name, tc.old, tc.new)
			}
		}
		if newReadYourWrites().echo(k, "10", "11") {
			t.Error("an event without a write of ours taken for an echo")
		}
	})
	t.Run("the event before the write's response", func(t *testing.T) {
		o := newReadYourWrites()
		err := o.write(k, "10", func() (string, error) {
			if o.echo(k, "10", "10") {
				t.Error("a resync during the write taken for it")
			}
			if !o.echo(k, "10", "11") {
				t.Error("the first event from the version written over, during the write, not taken for it")
			}
			if o.echo(k, "11", "12") {
				t.Error("a second event during the write taken for it")
			}
			return "11", nil
		})
		if err != nil || o.takeMissed(k) {
			t.Errorf("err %v; the event taken was the write's own: nothing missed", err)
		}
		if _, ok, _ := o.await(k); ok {
			t.Error("a write whose event came before its response is still remembered: every later read sees it")
		}
	})
	t.Run("another's event taken during the write", func(t *testing.T) {
		o := newReadYourWrites()
		_ = o.write(k, "10", func() (string, error) {
			o.echo(k, "10", "11") // another writer's, first
			return "12", nil
		})
		if !o.takeMissed(k) {
			t.Error("the event of another writer was swallowed without a second look")
		}
		if o.takeMissed(k) {
			t.Error("missed is cleared once taken")
		}
		_ = o.write(k, "12", func() (string, error) {
			o.echo(k, "12", "13")
			return "", errors.New("timeout")
		})
		if !o.takeMissed(k) {
			t.Error("an event taken for a write that failed may have been another's")
		}
		_ = o.write(k, "", func() (string, error) {
			o.echo(k, "", "14") // a create of the same name by another
			return "", errors.New("already exists")
		})
		if o.takeMissed(k) {
			t.Error("a failed create left a second look to take: its caller handles the failure")
		}
	})
	t.Run("a create", func(t *testing.T) {
		o := newReadYourWrites()
		o.wrote(k, "", "5")
		if !o.echo(k, "", "5") {
			t.Error("the event of our create not recognised")
		}
	})
}

func TestSyncedPast(t *testing.T) {
	for _, tc := range []struct {
		synced, rv string
		want       bool
	}{{"10", "9", true}, {"10", "10", true}, {"9", "10", false}, {"", "10", false}, {"100", "99", true}} {
		if got := syncedPast(tc.synced, tc.rv); got != tc.want {
			t.Errorf("syncedPast(%q, %q) = %v", tc.synced, tc.rv, got)
		}
	}
}

func TestHandledVersion(t *testing.T) {
	h := &handledVersion{}
	pod := func(rv string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}} }
	h.observe(pod("5"))
	h.observe(pod("12"))
	h.observe(pod("9")) // an older object handed out late does not move it back
	h.observe(cache.DeletedFinalStateUnknown{Obj: pod("3")})
	if got := h.get(); got != "12" {
		t.Errorf("handled version = %q, want 12", got)
	}
	h.observe(cache.DeletedFinalStateUnknown{Obj: pod("20")})
	if got := h.get(); got != "20" {
		t.Errorf("after a tombstone: %q, want 20", got)
	}
}
