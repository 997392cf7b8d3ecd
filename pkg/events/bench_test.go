package events_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

// BenchmarkBatcher measures events through the default Batcher and the real
// service over loopback, from as many concurrent callers as the reconciler
// has workers (64 by default), and from a couple. PostgreSQL is the test
// server (fsync off), SQLite the service's default (synchronous=FULL).
//
//	go test -run '^$' -bench BenchmarkBatcher -benchtime 20000x ./pkg/events/
func BenchmarkBatcher(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, par := range []int{1, 32} {
			// RunParallel runs par×GOMAXPROCS callers: 2 and 64 on two cores.
			b.Run(fmt.Sprintf("%s/callers=%d", backend, par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
				var opts eventsvctest.Options
				if backend == "postgres" {
					st, err := eventsvc.OpenPostgres(context.Background(), eventsvctest.StartPostgres(b))
					if err != nil {
						b.Fatal(err)
					}
					opts.Store = st
				}
				srv := eventsvctest.Start(b, opts)
				bt := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{})
				startBatcher(b, bt)
				var seq atomic.Int64
				b.SetParallelism(par)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(seq.Add(1))
						if err := bt.Record(context.Background(), event(fmt.Sprintf("run-%d", i%50), i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
				elapsed := time.Since(start)
				b.StopTimer()
				st := bt.Stats()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(st.Calls)*1000/float64(b.N), "calls/1000events")
				if stored, _ := srv.Store.Counts(); stored != b.N {
					b.Fatalf("stored %d of %d events", stored, b.N)
				}
			})
		}
	}
}
