package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createAll creates TaskActions first … first+n-1 of the workload, at rate
// per second (0: as fast as the creators go).
func createAll(ctx context.Context, o options, cl client.Client, ob *observer, first, n int, rate float64, bucket string) error {
	return inParallel(ctx, o.Creators, first, n, rate, func(i int) error {
		ta, want, err := workloadTaskAction(o, i, bucket)
		if err != nil {
			return err
		}
		if err := createRetrying(ctx, cl, ta); err != nil {
			return err
		}
		now := ob.now()
		ob.mu.Lock()
		rec := ob.get(ta.Name)
		rec.created, rec.want = now, want
		ob.mu.Unlock()
		return nil
	})
}

// inParallel calls do(i) for i in first … first+n-1 on workers goroutines, at
// most rate calls a second (0: no limit). It stops handing out work at the
// first error or when ctx ends, and returns that error once every call under
// way has returned.
func inParallel(ctx context.Context, workers, first, n int, rate float64, do func(i int) error) error {
	var limiter flowcontrol.RateLimiter
	if rate > 0 {
		limiter = flowcontrol.NewTokenBucketRateLimiter(float32(rate), 1)
	}
	idx := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := do(i); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := first; i < first+n; i++ {
		if limiter != nil {
			if err = limiter.Wait(ctx); err != nil {
				break
			}
		}
		select {
		case idx <- i:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// createRetrying creates obj, trying up to 5 times a second apart: a busy
// API server may time out or refuse a create now and then.
func createRetrying(ctx context.Context, cl client.Client, obj client.Object) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = cl.Create(cctx, obj)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", obj.GetName(), err)
	}
	return nil
}
