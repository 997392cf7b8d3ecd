package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/setup"
)

// writeCounter counts the executor's writes to the API server by
// "VERB resource[/subresource]".
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTrip(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.Method != http.MethodGet {
			parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
			res := ""
			for i := range parts {
				if parts[i] == "namespaces" && i+2 < len(parts) {
					res = parts[i+2]
					if i+4 < len(parts) {
						res += "/" + parts[i+4]
					}
					break
				}
			}
			if res == "" {
				res = parts[len(parts)-1]
			}
			w.mu.Lock()
			w.counts[req.Method+" "+res]++
			w.mu.Unlock()
		}
		return resp, err
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The admission webhook adds the finalizer with the create, so the executor
// spends one metadata write less per TaskAction; when the webhook is down the
// reconciler adds it itself and the tasks still run. Measured here on the
// same tasks (run to success on the local node) both ways.
func TestWebhookSavesTheFinalizerWrite(t *testing.T) {
	const n = 8
	startNode(t, "local-writes")
	type result struct {
		perTA    map[string]float64
		writes   float64
		metadata float64
	}
	run := func(t *testing.T, withWebhook bool) result {
		ctx := context.Background()
		ns := testenv.Namespace(t, env.Client, "whw-")
		cfg := webhookConfig()
		cfg.Webhook.Standalone = false
		cfg.Webhook.Enabled = withWebhook // off: the configurations stay, nothing answers (fail open)
		cfg.GC.Interval = config.Duration{}
		cfg.RequeueDuration = config.Duration{Duration: time.Second}
		cfg.DefaultCPU, cfg.DefaultMemory = "100m", "64Mi"
		counter := &writeCounter{counts: map[string]int{}}
		rc := rest.CopyConfig(env.Config)
		rc.Wrap(counter.wrap)
		stop := startExecutor(t, cfg, rc, setup.Options{Namespaces: []string{ns}, Recorder: &events.MemoryRecorder{}})
		defer stop()

		for i := range n {
			ta := taskAction(ns, fmt.Sprintf("w-%d", i))
			ta.Spec.Template.Container.Command = []string{"true"}
			if err := env.Client.Create(ctx, ta); err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(ta.Finalizers, flytev1.Finalizer); got != withWebhook {
				t.Errorf("finalizer at creation: %v, want %v", got, withWebhook)
			}
		}
		for i := range n {
			name := fmt.Sprintf("w-%d", i)
			testenv.Eventually(t, 90*time.Second, name+" succeeded", func() bool {
				ta := testenv.GetTaskAction(t, env.Client, ns, name)
				return meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionSucceeded)
			})
		}
		stop()
		r := result{perTA: map[string]float64{}}
		for k, v := range counter.counts {
			if strings.Contains(k, "events") {
				continue // Kubernetes Events: not the TaskAction's own writes
			}
			r.perTA[k] = float64(v) / n
			r.writes += float64(v) / n
			if k == "PATCH taskactions" || k == "PUT taskactions" {
				r.metadata += float64(v) / n
			}
		}
		keys := make([]string, 0, len(r.perTA))
		for k := range r.perTA {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("%-28s %.2f per TaskAction", k, r.perTA[k])
		}
		t.Logf("webhook %v: %.2f writes per TaskAction, %.2f of them metadata (n=%d)", withWebhook, r.writes, r.metadata, n)
		return r
	}
	var with, without result
	t.Run("webhook up", func(t *testing.T) { with = run(t, true) })
	t.Run("webhook down", func(t *testing.T) { without = run(t, false) })
	if t.Failed() {
		return
	}
	// Metadata, from creation to the end: none with the webhook, the
	// finalizer's add without (its release comes with the deletion).
	if with.metadata != 0 || without.metadata != 1 {
		t.Errorf("metadata writes per TaskAction: %.2f with the webhook, %.2f without; want 0 and 1", with.metadata, without.metadata)
	}
	// Status patches depend on which phases a reconcile happens to observe, so
	// totals are reported, not compared.
	t.Logf("writes per TaskAction: %.2f with the webhook, %.2f without", with.writes, without.writes)
}
