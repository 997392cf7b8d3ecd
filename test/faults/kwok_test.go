package faults

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/test/faults/audit"
)

// The wait for the last TaskAction after the fault (they take a few seconds
// each on the rig; the executor may back off for a while after a fault).
const settleTimeout = 5 * time.Minute

// Crash: the executor is SIGKILLed K times at seeded random moments and
// restarted each time.
func TestCrash(t *testing.T) {
	x := newSuite(t, 1)
	user := x.users[0]
	x.startExecutor(user, false, true)
	want := x.createMix("crash", 0, x.s.N, false)
	rnd := x.seeded()
	for k := range x.s.K {
		d := time.Duration(500+rnd.Intn(6000)) * time.Millisecond
		time.Sleep(d)
		n, _, _ := x.terminalCount()
		x.logf("SIGKILL %d of %d (%s after the last start; %d terminal)", k+1, x.s.K, d, n)
		x.executors[user].Kill()
		x.startExecutor(user, false, true)
	}
	if !x.waitTerminal(x.s.N, settleTimeout) {
		t.Errorf("not every TaskAction ended within %s of the last restart", settleTimeout)
	}
	x.check(fmt.Sprintf("crash (K=%d, seed %d)", x.s.K, x.s.Seed), want, nil, nil)
}

// Outage: the events service (behind its witness: connection refused) and the
// cache service go away for FAULTS_OUTAGE mid-run, then come back on the
// same stores. Three quarters of the TaskActions are created before, the
// rest during the outage: work waits, then completes.
func TestServiceOutage(t *testing.T) {
	x := newSuite(t, 1)
	x.startExecutor(x.users[0], false, true)
	before := x.s.N * 3 / 4
	want := x.createMix("outage", 0, before, false)
	if !x.waitTerminal(before/3, 2*time.Minute) {
		t.Fatal("the run did not get going")
	}
	n, _, _ := x.terminalCount()
	x.logf("outage starts (%d of %d terminal): events service, its witness and the cache service down", n, before)
	x.witness.Down()
	x.eventsSvc.Kill()
	x.cacheSvc.Kill()
	time.Sleep(x.s.Outage / 4)
	for k, v := range x.createMix("outage", before, x.s.N, false) {
		want[k] = v
	}
	time.Sleep(x.s.Outage - x.s.Outage/4)
	n, _, _ = x.terminalCount()
	x.startEventsService()
	x.startCacheService()
	if err := x.witness.Up(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	x.logf("services back after %s (%d of %d terminal)", x.s.Outage, n, x.s.N)
	if !x.waitTerminal(x.s.N, settleTimeout) {
		t.Errorf("not every TaskAction ended within %s of the services' return", settleTimeout)
	}
	recovery := x.lastTerminal().Sub(back)
	x.logf("from the services' return to the last TaskAction terminal: %s", recovery.Round(100*time.Millisecond))
	x.check(fmt.Sprintf("outage (%s; last terminal %s after the return)", x.s.Outage, recovery.Round(100*time.Millisecond)), want, nil, nil)
}

// API-server restart: kube-apiserver stops for 5 s mid-run and comes back on
// the same etcd.
func TestAPIServerRestart(t *testing.T) {
	x := newSuite(t, 1)
	x.startExecutor(x.users[0], false, true)
	want := x.createMix("apirestart", 0, x.s.N, false)
	if !x.waitTerminal(x.s.N/4, 2*time.Minute) {
		t.Fatal("the run did not get going")
	}
	x.logf("restarting kube-apiserver (etcd kept)")
	if err := x.rig.RestartAPIServer(x.ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	x.logf("kube-apiserver back")
	if !x.waitTerminal(x.s.N, settleTimeout) {
		t.Errorf("not every TaskAction ended within %s of the restart", settleTimeout)
	}
	x.check("API-server restart", want, nil, nil)
}

// Leader failover: two replicas elect a leader; the leader is SIGKILLed; the
// standby must take over within the lease duration (plus its polling: two
// jittered retry periods) of the leader's last renewal, and no replica may
// write while it does not hold the lease.
func TestLeaderFailover(t *testing.T) {
	x := newSuite(t, 2)
	for _, u := range x.users {
		x.startExecutor(u, true, false)
	}
	leader := x.waitLeader("", 2*time.Minute)
	standby := x.users[1-indexOf(x.users, leader)]
	x.logf("leader: %s", leader)
	want := x.createMix("failover", 0, x.s.N, false)
	if !x.waitTerminal(x.s.N/4, 2*time.Minute) {
		t.Fatal("the run did not get going")
	}
	killed := time.Now()
	x.executors[leader].Kill()
	x.logf("leader SIGKILLed")
	if got := x.waitLeader(leader, leaseDuration+2*retryPeriod+30*time.Second); got != standby {
		t.Fatalf("new leader %q, want the standby %q", got, standby)
	}
	if !x.waitTerminal(x.s.N, settleTimeout) {
		t.Errorf("not every TaskAction ended within %s of the failover", settleTimeout)
	}
	var takeover, sinceRenewal time.Duration
	x.check("leader failover", want, nil, func(r *audit.Report, reqs []audit.APIRequest) {
		terms := audit.LeaseTerms(reqs, setup.LeaderElectionID, leaseDuration)
		for i, term := range terms {
			if term.Holder == standby && term.From.After(killed) && i > 0 {
				takeover = term.From.Sub(killed)
				// The old term ends at the new one's start; its last renewal was a lease duration before its natural end.
				sinceRenewal = term.From.Sub(lastRenewal(reqs, terms[i-1].Holder, killed))
				break
			}
		}
		n, details := audit.WritesWithoutLease(reqs, x.users, setup.LeaderElectionID, leaseDuration)
		t.Logf("failover: the standby took the lease %s after the kill, %s after the leader's last renewal (lease %s, retry %s); %d writes without the lease",
			takeover.Round(100*time.Millisecond), sinceRenewal.Round(100*time.Millisecond), leaseDuration, retryPeriod, n)
		for _, d := range details {
			t.Logf("  - %s", d)
		}
		if n != 0 {
			t.Errorf("%d writes from a replica not holding the lease", n)
		}
		// The standby polls every retry period plus up to 1.2 of it (client-go
		// jitters it so): it sees the last renewal at its next poll, waits out
		// the lease from then, and takes the Lease at its first poll after.
		bound := leaseDuration + 2*retryPeriod*22/10
		if takeover == 0 || sinceRenewal > bound {
			t.Errorf("takeover %s after the leader's last renewal: want within %s", sinceRenewal, bound)
		}
	})
}

// lastRenewal is the last successful Lease write of holder before t.
func lastRenewal(reqs []audit.APIRequest, holder string, t time.Time) time.Time {
	var last time.Time
	for _, q := range reqs {
		if q.Resource == "leases" && q.Name == setup.LeaderElectionID && q.User == holder && q.Code/100 == 2 && q.At.Before(t) && q.At.After(last) {
			last = q.At
		}
	}
	return last
}

// waitCount polls count until it reaches want or timeout passes; it returns the last count.
func (x *suite) waitCount(what string, want int, timeout time.Duration, count func() (int, error)) int {
	x.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := count()
		if err == nil && n >= want || time.Now().After(deadline) {
			x.logf("%s: %d of %d (error: %v)", what, n, want, err)
			return n
		}
		time.Sleep(pollInterval)
	}
}

// waitLeader waits for a lease holder other than not, from the audit log.
func (x *suite) waitLeader(not string, timeout time.Duration) string {
	x.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if reqs, err := audit.ReadAPILog(x.rig.AuditLog); err == nil {
			terms := audit.LeaseTerms(reqs, setup.LeaderElectionID, leaseDuration)
			if n := len(terms); n > 0 && terms[n-1].Holder != not {
				return terms[n-1].Holder
			}
		}
		time.Sleep(pollInterval)
	}
	x.t.Fatalf("no new leader within %s", timeout)
	return ""
}

// Delete storm: FAULTS_STORM TaskActions held running are deleted at once:
// each must go, with exactly one ABORTED event, its pod deleted.
func TestDeleteStorm(t *testing.T) {
	x := newSuite(t, 1)
	// The storm slows the API server's writes, which holds statuses back up
	// to saturatedStatusDelay (5 minutes by default) or until the saturation
	// ends: one minute here, as the storm is about deletion.
	x.startExecutor(x.users[0], false, true, "--executor.saturatedStatusDelay=1m")
	n := x.s.Storm
	x.createMix("storm", 0, n, true)
	// First every pod runs (kwok), then every status says so: a status that
	// does not follow its running pod within seven minutes is a defect of its
	// own (the storm goes on with it).
	x.waitCount("pods running", n, 5*time.Minute, func() (int, error) {
		var pods corev1.PodList
		err := x.cl.List(x.ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{setup.ManagedLabel: "true"})
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running, err
	})
	executing := func() (int, error) {
		var list flytev1.TaskActionList
		err := x.cl.List(x.ctx, &list, client.InNamespace(namespace))
		running := 0
		for _, ta := range list.Items {
			if c := meta.FindStatusCondition(ta.Status.Conditions, flytev1.ConditionProgressing); c != nil && c.Reason == flytev1.ReasonExecuting {
				running++
			}
		}
		return running, err
	}
	if got := x.waitCount("statuses Executing", n, 7*time.Minute, executing); got < n {
		t.Errorf("%d of %d TaskActions still not Executing seven minutes after every pod ran", n-got, n)
	}
	x.logf("deleting the %d TaskActions at once", n)
	deleted := map[string]string{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, 64)
	for i := range n {
		ta, _ := taskAction("storm", i, true)
		deleted[namespace+"/"+ta.Name] = audit.TaskActionKey(ta)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := x.cl.Delete(x.ctx, ta); err != nil && !apierrors.IsNotFound(err) {
				mu.Lock()
				t.Errorf("delete %s: %v", ta.Name, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	start := time.Now()
	gone := false
	for time.Since(start) < settleTimeout {
		var list flytev1.TaskActionList
		if err := x.cl.List(x.ctx, &list, client.InNamespace(namespace)); err == nil && len(list.Items) == 0 {
			gone = true
			break
		}
		time.Sleep(pollInterval)
	}
	x.logf("all %d deleted TaskActions gone: %v after %s", n, gone, time.Since(start).Round(100*time.Millisecond))
	x.check(fmt.Sprintf("delete storm (%d)", n), nil, deleted, nil)
}
