package local

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errStopped is a component's clean return.
var errStopped = errors.New("stopped")

// group runs goroutines and reports the first that ends.
type group struct {
	errc chan error
	done chan struct{}
	n    int
}

func newGroup() *group { return &group{errc: make(chan error, 16), done: make(chan struct{}, 16)} }

// Go runs f; its end is an error on errc (a nil return counts: nothing should
// stop before it is told to).
func (g *group) Go(name string, f func() error) {
	g.n++
	go func() {
		defer func() { g.done <- struct{}{} }()
		err := f()
		if err == nil {
			err = errStopped
		}
		select {
		case g.errc <- fmt.Errorf("%s: %w", name, err):
		default:
		}
	}()
}

// Wait waits up to d for every goroutine, after their context was cancelled,
// and returns the errors other than a clean stop.
func (g *group) Wait(d time.Duration) error {
	timeout := time.After(d)
	for ; g.n > 0; g.n-- {
		select {
		case <-g.done:
		case <-timeout:
			return fmt.Errorf("%d components did not stop within %s", g.n, d)
		}
	}
	var errs []error
	for {
		select {
		case err := <-g.errc:
			if !errors.Is(err, errStopped) && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		default:
			return errors.Join(errs...)
		}
	}
}
