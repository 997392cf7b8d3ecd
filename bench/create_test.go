package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// inParallel hands out every index once, from first, and returns the first
// error, after which it hands out no more.
func TestInParallel(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	if err := inParallel(context.Background(), 4, 5, 100, 0, func(i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 105; i++ {
		if seen[i] != 1 {
			t.Fatalf("index %d handed out %d times", i, seen[i])
		}
	}
	if len(seen) != 100 {
		t.Fatalf("%d indexes handed out, want 100", len(seen))
	}
	boom := errors.New("boom")
	var calls atomic.Int64
	err := inParallel(context.Background(), 2, 0, 1000, 0, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	if c := calls.Load(); c >= 1000 {
		t.Fatalf("%d calls after the error, want the rest not handed out", c)
	}
}
