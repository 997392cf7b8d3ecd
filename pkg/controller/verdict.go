package controller

import (
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// A policy (the policy_*.go files) is a pure function of what was gathered,
// the attempt's state and the time, returning a verdict: what becomes of the
// attempt. Policies never touch the plan and never call one another. The
// decider asks them in a fixed order; the first verdict that decides is
// settled into the plan (settle, and the plan's writers in
// taskaction_plan.go), and those before it that did not decide still add the
// wake-ups they asked for (a deadline still ahead).
type verdict struct {
	kind verdictKind
	// t is the transition recorded (progress, retry, end, succeed).
	t transition
	// state is the attempt's state kept (progress, system failure).
	state attemptState
	// cause is what failed (system failure).
	cause *plugin.ExecError
	// wake asks to look again after this long (0: no wish), whether or not
	// the verdict decides.
	wake time.Duration
	// wakeOnly: the wake replaces the plan's other waits (a wait of known
	// length: a quota backoff, another's cache reservation); a deadline an
	// earlier policy asked for still stands (settleFirst).
	wakeOnly bool
	// quotaRefused counts a launch refused for quota (metrics).
	quotaRefused bool
	// cacheHit: the end is the cache's outputs (status HIT).
	cacheHit bool
}

type verdictKind uint8

const (
	undecided            verdictKind = iota // the policy does not decide this step
	verdictWait                             // nothing changes: look again after wake
	verdictProgress                         // a transition that is not the end
	verdictRetry                            // the attempt failed; the next one follows
	verdictSucceed                          // the task succeeded (its outputs cached first)
	verdictEnd                              // the TaskAction ends with t
	verdictSystemFailure                    // a failure that is not the task's own
)

func (v verdict) decides() bool { return v.kind != undecided }

// settleFirst settles the first of vs that decides; it says whether one did.
// The wake-ups the undecided ones before it asked for (a deadline ahead) stay
// in the plan whatever the verdict's own wait, unless the verdict ended the
// TaskAction.
func (d decider) settleFirst(p *Plan, w World, now time.Time, vs ...verdict) bool {
	var ahead time.Duration
	for _, v := range vs {
		if !v.decides() {
			if v.wake > 0 && (ahead <= 0 || v.wake < ahead) {
				ahead = v.wake
			}
			continue
		}
		d.settle(p, w, now, v)
		if p.WakeAfter > 0 {
			p.wake(ahead)
		}
		return true
	}
	p.wake(ahead)
	return false
}

// settle turns a verdict into the plan.
func (d decider) settle(p *Plan, w World, now time.Time, v verdict) {
	switch v.kind {
	case verdictWait:
	case verdictProgress:
		if v.quotaRefused {
			p.Metrics.QuotaRefusal = true
		}
		d.progress(p, w, now, v.state, v.t)
	case verdictRetry:
		d.retry(p, w, now, v.t)
	case verdictSucceed:
		d.succeed(p, w, now, v.t)
	case verdictEnd:
		if v.cacheHit {
			p.Status.CacheStatus = flytev1.CacheHit
			p.Metrics.CacheLookup = p.Status.CacheStatus.String()
		}
		d.final(p, w, now, v.t)
	case verdictSystemFailure:
		d.systemFailure(p, w, now, v.state, v.cause)
	}
	if v.wakeOnly {
		p.WakeAfter = 0
	}
	p.wake(v.wake)
}

// ends is the verdict that ends the TaskAction with t.
func ends(t transition) verdict { return verdict{kind: verdictEnd, t: t} }
