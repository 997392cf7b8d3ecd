package cache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/cachesvc"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// backends: per backend, a setup run once in the backend's test that returns
// an opener of a store per subtest. Subtests use keys of their own (keyFor),
// so PostgreSQL's one server and database need no truncation between them.
var backends = []struct {
	name string
	// replicas: how many services share the database in the race tests;
	// several replicas may share a PostgreSQL database, never a SQLite file.
	replicas int
	setup    func(bt *testing.T) func(t *testing.T) cachesvc.Store
}{
	{"sqlite", 1, func(*testing.T) func(t *testing.T) cachesvc.Store {
		return func(t *testing.T) cachesvc.Store {
			s, err := cachesvc.OpenSQLite(context.Background(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
	}},
	{"postgres", 2, func(bt *testing.T) func(t *testing.T) cachesvc.Store {
		dsn := cachesvctest.StartPostgres(bt)
		return func(t *testing.T) cachesvc.Store { return cachesvctest.OpenPostgres(t, dsn) }
	}},
}

// keyFor is a key no other subtest uses.
func keyFor(t *testing.T, cacheKey string) cache.Key {
	return cache.Key{Org: "org", Project: "proj", Domain: "development", Key: t.Name() + "/" + cacheKey}
}

func entry(uri string, attempt uint32) cache.Entry {
	return cache.Entry{OutputURI: uri, Source: cache.Source{Org: "org", Project: "proj", Domain: "development", Run: "run-1", Action: "a0", Attempt: attempt}}
}

// TestClientAgainstService drives the client against the real service over
// loopback on each store.
func TestClientAgainstService(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			open := b.setup(t)
			t.Run("entries", func(t *testing.T) { testEntries(t, open) })
			t.Run("max age", func(t *testing.T) { testMaxAge(t, open) })
			t.Run("reservations", func(t *testing.T) { testReservations(t, open) })
			t.Run("heartbeat clamp", func(t *testing.T) { testHeartbeatClamp(t, open) })
			t.Run("reservation race", func(t *testing.T) { testReservationRace(t, replicas(t, open, b.replicas)) })
			t.Run("put race", func(t *testing.T) { testPutRace(t, replicas(t, open, b.replicas)) })
			t.Run("invalid requests", func(t *testing.T) { testInvalid(t, open) })
		})
	}
}

func testEntries(t *testing.T, open func(*testing.T) cachesvc.Store) {
	ctx := context.Background()
	// Each step runs against the state the previous ones left.
	type step struct {
		do        string // get, put, overwrite, delete
		uri       string
		attempt   uint32
		advance   time.Duration // clock moves before the step
		wantURI   string        // get: "" means a miss
		wantAt    time.Duration // get: CreatedAt - t0
		wantExist bool          // put: alreadyExisted
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a miss is nil without error", []step{{do: "get"}}},
		{"put then get returns the entry and its creation time", []step{
			{do: "put", uri: "s3://b/o1/outputs.pb", attempt: 2, advance: time.Minute},
			{do: "get", wantURI: "s3://b/o1/outputs.pb", wantAt: time.Minute},
		}},
		{"a second put keeps the first entry and reports it existed", []step{
			{do: "put", uri: "s3://b/first"},
			{do: "put", uri: "s3://b/second", advance: time.Second, wantExist: true},
			{do: "get", wantURI: "s3://b/first", wantAt: 0},
		}},
		{"overwrite replaces the entry and keeps the key's creation time", []step{
			{do: "put", uri: "s3://b/first"},
			{do: "overwrite", uri: "s3://b/second", advance: time.Hour},
			{do: "get", wantURI: "s3://b/second", wantAt: 0},
		}},
		{"overwrite of a missing entry stores it", []step{
			{do: "overwrite", uri: "s3://b/only"},
			{do: "get", wantURI: "s3://b/only"},
		}},
		{"delete makes a miss, and a put after it stores again", []step{
			{do: "put", uri: "s3://b/first"},
			{do: "delete"},
			{do: "get"},
			{do: "put", uri: "s3://b/again", advance: time.Second},
			{do: "get", wantURI: "s3://b/again", wantAt: time.Second},
		}},
		{"deleting a missing entry is not an error", []step{{do: "delete"}, {do: "delete"}, {do: "get"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := cachesvctest.NewClock(t0)
			inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t), Clock: clock})
			c := cache.NewClient(inst.URL, nil)
			key := keyFor(t, "inputs-hash")
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				switch s.do {
				case "get":
					got, err := c.Get(ctx, key)
					if err != nil {
						t.Fatalf("step %d get: %v", i, err)
					}
					if s.wantURI == "" {
						if got != nil {
							t.Fatalf("step %d get: want a miss, got %+v", i, *got)
						}
						continue
					}
					if got == nil {
						t.Fatalf("step %d get: miss, want %s", i, s.wantURI)
					}
					if got.OutputURI != s.wantURI || !got.CreatedAt.Equal(t0.Add(s.wantAt)) {
						t.Fatalf("step %d get: got %s created %s, want %s created %s", i, got.OutputURI, got.CreatedAt, s.wantURI, t0.Add(s.wantAt))
					}
				case "put":
					existed, err := c.Put(ctx, key, entry(s.uri, s.attempt))
					if err != nil {
						t.Fatalf("step %d put: %v", i, err)
					}
					if existed != s.wantExist {
						t.Fatalf("step %d put: alreadyExisted = %v, want %v", i, existed, s.wantExist)
					}
				case "overwrite":
					if err := c.Overwrite(ctx, key, entry(s.uri, s.attempt)); err != nil {
						t.Fatalf("step %d overwrite: %v", i, err)
					}
				case "delete":
					if err := c.Delete(ctx, key); err != nil {
						t.Fatalf("step %d delete: %v", i, err)
					}
				}
			}
		})
	}

	t.Run("an empty org is a scope of its own", func(t *testing.T) {
		inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t)})
		c := cache.NewClient(inst.URL, nil)
		key := keyFor(t, "k")
		key.Org = ""
		if existed, err := c.Put(ctx, key, entry("s3://b/no-org", 1)); err != nil || existed {
			t.Fatalf("put without an org: existed=%v err=%v", existed, err)
		}
		if got, err := c.Get(ctx, key); err != nil || got == nil || got.OutputURI != "s3://b/no-org" {
			t.Fatalf("get without an org: %+v, %v", got, err)
		}
		withOrg := key
		withOrg.Org = cache.DefaultOrg
		if got, err := c.Get(ctx, withOrg); err != nil || got != nil {
			t.Fatalf("get with org %q: %+v, %v, want a miss", withOrg.Org, got, err)
		}
		r, err := c.GetOrExtendReservation(ctx, key, "me", time.Second)
		if err != nil || !r.HeldBy("me") {
			t.Fatalf("reserve without an org: %+v, %v", r, err)
		}
		if err := c.ReleaseReservation(ctx, key, "me"); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, key); err != nil || got != nil {
			t.Fatalf("get after delete: %+v, %v", got, err)
		}
	})

	t.Run("the source round-trips and keys differ in every part", func(t *testing.T) {
		inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t)})
		c := cache.NewClient(inst.URL, nil)
		base := keyFor(t, "k")
		want := entry("gs://b/x", 3)
		if existed, err := c.Put(ctx, base, want); err != nil || existed {
			t.Fatalf("put: existed=%v err=%v", existed, err)
		}
		got, err := c.Get(ctx, base)
		if err != nil || got == nil {
			t.Fatalf("get: %v %v", got, err)
		}
		if got.Source != want.Source || got.OutputURI != want.OutputURI || got.Task.GetProject() != base.Project {
			t.Fatalf("got %+v, want %+v", *got, want)
		}
		// Parts are columns, not a joined string: "a-b"+"c" is not "a"+"b-c".
		variants := []func(k *cache.Key){
			func(k *cache.Key) { k.Org += "x" },
			func(k *cache.Key) { k.Project += "x" },
			func(k *cache.Key) { k.Domain += "x" },
			func(k *cache.Key) { k.Key += "x" },
			func(k *cache.Key) { k.Project, k.Domain = k.Project+"-"+k.Domain, "x" },
		}
		for i, v := range variants {
			k := base
			v(&k)
			if got, err := c.Get(ctx, k); err != nil || got != nil {
				t.Errorf("variant %d (%s): want a miss, got %+v, %v", i, k, got, err)
			}
		}
	})
}

func testMaxAge(t *testing.T, open func(*testing.T) cachesvc.Store) {
	ctx := context.Background()
	clock := cachesvctest.NewClock(t0)
	st := open(t)
	inst := cachesvctest.Start(t, cachesvctest.Options{Store: st, Clock: clock, MaxAge: time.Hour})
	c := cache.NewClient(inst.URL, nil)
	key := keyFor(t, "k")
	if _, err := c.Put(ctx, key, entry("s3://b/old", 1)); err != nil {
		t.Fatal(err)
	}
	check := func(what, wantURI string) {
		t.Helper()
		got, err := c.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		switch {
		case wantURI == "" && got != nil:
			t.Fatalf("%s: want a miss, got %s", what, got.OutputURI)
		case wantURI != "" && (got == nil || got.OutputURI != wantURI):
			t.Fatalf("%s: want %s, got %+v", what, wantURI, got)
		}
	}
	clock.Advance(time.Hour)
	check("at exactly the max age", "s3://b/old")
	clock.Advance(time.Second)
	check("past the max age", "")

	// A service without a max age over the same store still sees the entry:
	// age makes it count as missing, it is not deleted.
	noLimit := cache.NewClient(cachesvctest.Start(t, cachesvctest.Options{Store: st, Clock: clock}).URL, nil)
	if got, err := noLimit.Get(ctx, key); err != nil || got == nil {
		t.Fatalf("without max age: want the old entry, got %+v, %v", got, err)
	}

	// An aged-out entry is replaced by a plain Put.
	existed, err := c.Put(ctx, key, entry("s3://b/new", 2))
	if err != nil || existed {
		t.Fatalf("put over an aged-out entry: existed=%v err=%v, want stored", existed, err)
	}
	check("after replacing", "s3://b/new")
	if existed, err := c.Put(ctx, key, entry("s3://b/newer", 3)); err != nil || !existed {
		t.Fatalf("put over the fresh entry: existed=%v err=%v, want already existed", existed, err)
	}
}

func testReservations(t *testing.T, open func(*testing.T) cachesvc.Store) {
	ctx := context.Background()
	const hb = 10 * time.Second
	const a, b, other = "ns/action-a", "ns/action-b", "ns/action-c"
	type step struct {
		advance time.Duration
		do      string // get, release
		owner   string
		// get: who holds it afterwards and until when, relative to t0
		wantOwner   string
		wantExpires time.Duration
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a free key is granted for three heartbeats", []step{
			{do: "get", owner: a, wantOwner: a, wantExpires: 3 * hb},
		}},
		{"the owner's heartbeat extends it", []step{
			{do: "get", owner: a, wantOwner: a, wantExpires: 3 * hb},
			{advance: 25 * time.Second, do: "get", owner: a, wantOwner: a, wantExpires: 25*time.Second + 3*hb},
		}},
		{"another owner gets the holder back, and the expiry unchanged", []step{
			{do: "get", owner: a, wantOwner: a, wantExpires: 3 * hb},
			{advance: 5 * time.Second, do: "get", owner: b, wantOwner: a, wantExpires: 3 * hb},
			{do: "get", owner: a, wantOwner: a, wantExpires: 5*time.Second + 3*hb},
		}},
		{"a reservation whose owner stopped heartbeating expires and is taken over", []step{
			{do: "get", owner: a, wantOwner: a, wantExpires: 3 * hb},
			{advance: 3*hb - time.Millisecond, do: "get", owner: b, wantOwner: a, wantExpires: 3 * hb},
			{advance: time.Millisecond, do: "get", owner: b, wantOwner: b, wantExpires: 6 * hb},
			// the old owner comes back: it lost the key
			{do: "get", owner: a, wantOwner: b, wantExpires: 6 * hb},
		}},
		{"release by another owner does nothing", []step{
			{do: "get", owner: a, wantOwner: a, wantExpires: 3 * hb},
			{do: "release", owner: b},
			{do: "get", owner: other, wantOwner: a, wantExpires: 3 * hb},
		}},
		{"release by the owner frees the key for the next", []step{
			{do: "get", owner: a, wantOwner: a, wantExpires: 3 * hb},
			{advance: time.Second, do: "release", owner: a},
			{do: "get", owner: b, wantOwner: b, wantExpires: time.Second + 3*hb},
		}},
		{"releasing a missing reservation is fine, twice", []step{
			{do: "release", owner: a},
			{do: "release", owner: a},
			{do: "get", owner: b, wantOwner: b, wantExpires: 3 * hb},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := cachesvctest.NewClock(t0)
			inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t), Clock: clock})
			c := cache.NewClient(inst.URL, nil)
			key := keyFor(t, "k")
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				switch s.do {
				case "get":
					r, err := c.GetOrExtendReservation(ctx, key, s.owner, hb)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if r.Owner != s.wantOwner || !r.ExpiresAt.Equal(t0.Add(s.wantExpires)) {
						t.Fatalf("step %d: %s asked; got holder %s until %s, want %s until %s",
							i, s.owner, r.Owner, r.ExpiresAt, s.wantOwner, t0.Add(s.wantExpires))
					}
					if r.HeldBy(s.owner) != (s.owner == s.wantOwner) {
						t.Fatalf("step %d: HeldBy(%s) = %v", i, s.owner, r.HeldBy(s.owner))
					}
				case "release":
					if err := c.ReleaseReservation(ctx, key, s.owner); err != nil {
						t.Fatalf("step %d: release: %v", i, err)
					}
				}
			}
		})
	}

	t.Run("reservations and entries are independent", func(t *testing.T) {
		inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t)})
		c := cache.NewClient(inst.URL, nil)
		key := keyFor(t, "k")
		if _, err := c.GetOrExtendReservation(ctx, key, a, hb); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Get(ctx, key); err != nil || got != nil {
			t.Fatalf("a reservation is not an entry: got %+v, %v", got, err)
		}
		if _, err := c.Put(ctx, key, entry("s3://b/x", 1)); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		r, err := c.GetOrExtendReservation(ctx, key, b, hb)
		if err != nil || r.Owner != a {
			t.Fatalf("deleting the entry must not free the reservation: got %+v, %v", r, err)
		}
	})
}

func testHeartbeatClamp(t *testing.T, open func(*testing.T) cachesvc.Store) {
	ctx := context.Background()
	clock := cachesvctest.NewClock(t0)
	inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t), Clock: clock})
	c := cache.NewClient(inst.URL, nil)
	cases := []struct {
		asked, want time.Duration
	}{
		{0, cachesvc.DefaultHeartbeat},
		{time.Nanosecond, time.Second},
		{100 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{30 * time.Second, 30 * time.Second},
		{time.Minute, time.Minute},
		{5 * time.Minute, time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.asked.String(), func(t *testing.T) {
			r, err := c.GetOrExtendReservation(ctx, keyFor(t, "k"), "ns/a", tc.asked)
			if err != nil {
				t.Fatal(err)
			}
			if r.HeartbeatInterval != tc.want || !r.ExpiresAt.Equal(t0.Add(3*tc.want)) {
				t.Fatalf("asked %s: got heartbeat %s expiring %s, want %s expiring %s",
					tc.asked, r.HeartbeatInterval, r.ExpiresAt, tc.want, t0.Add(3*tc.want))
			}
		})
	}
}

// replicas serves the database through n services, each with its own store
// (connection pool) and client, as n replicas would.
func replicas(t *testing.T, open func(*testing.T) cachesvc.Store, n int) []cache.Client {
	var out []cache.Client
	for range n {
		s := open(t)
		out = append(out, cache.NewClient(cachesvctest.Start(t, cachesvctest.Options{Store: s}).URL, nil, cache.WithTimeout(10*time.Second)))
	}
	return out
}

func testReservationRace(t *testing.T, clients []cache.Client) {
	ctx := context.Background()
	const rounds, racers = 15, 8
	for round := range rounds {
		key := keyFor(t, fmt.Sprintf("round-%d", round))
		got := make([]cache.Reservation, racers)
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				got[i], errs[i] = clients[i%len(clients)].GetOrExtendReservation(ctx, key, fmt.Sprintf("ns/owner-%d", i), time.Minute)
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for i := range racers {
			if errs[i] != nil {
				t.Fatalf("round %d racer %d: %v", round, i, errs[i])
			}
			if got[i].HeldBy(fmt.Sprintf("ns/owner-%d", i)) {
				winners++
			}
			if got[i].Owner != got[0].Owner {
				t.Fatalf("round %d: racers see different holders: %s and %s", round, got[0].Owner, got[i].Owner)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d racers got the reservation, want exactly 1", round, winners)
		}
	}
}

func testPutRace(t *testing.T, clients []cache.Client) {
	ctx := context.Background()
	const rounds, racers = 15, 8
	for round := range rounds {
		key := keyFor(t, fmt.Sprintf("round-%d", round))
		existed := make([]bool, racers)
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				existed[i], errs[i] = clients[i%len(clients)].Put(ctx, key, entry(fmt.Sprintf("s3://b/racer-%d", i), 1))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range racers {
			if errs[i] != nil {
				t.Fatalf("round %d racer %d: %v", round, i, errs[i])
			}
			if !existed[i] {
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both stored", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer stored", round)
		}
		e, err := clients[0].Get(ctx, key)
		if err != nil || e == nil || e.OutputURI != fmt.Sprintf("s3://b/racer-%d", winner) {
			t.Fatalf("round %d: stored entry %+v (%v), want the winner's (racer %d)", round, e, err, winner)
		}
	}
}

func testInvalid(t *testing.T, open func(*testing.T) cachesvc.Store) {
	ctx := context.Background()
	inst := cachesvctest.Start(t, cachesvctest.Options{Store: open(t)})
	c := cache.NewClient(inst.URL, nil)
	good := cache.Key{Org: "o", Project: "p", Domain: "d", Key: "k"}
	with := func(f func(k *cache.Key)) cache.Key { k := good; f(&k); return k }
	cases := []struct {
		name  string
		key   cache.Key
		owner string
		entry cache.Entry
		hb    time.Duration
		// wantErr in every call's error (get, put, delete, reserve, release),
		// or, with only, in those calls' alone (the others must succeed)
		wantErr string
		only    []string
	}{
		{name: "no project", key: with(func(k *cache.Key) { k.Project = "" }), wantErr: "identifier.project is required"},
		{name: "no domain", key: with(func(k *cache.Key) { k.Domain = "" }), wantErr: "identifier.domain is required"},
		{name: "no key", key: with(func(k *cache.Key) { k.Key = "" }), wantErr: "base_request.key is required"},
		{name: "NUL in a part", key: with(func(k *cache.Key) { k.Project = "a\x00b" }), wantErr: "identifier.project contains a NUL byte"},
		{name: "invalid UTF-8", key: with(func(k *cache.Key) { k.Domain = "\xff" }), wantErr: "identifier.domain is not valid UTF-8"},
		{name: "key too long", key: with(func(k *cache.Key) { k.Key = strings.Repeat("h", cache.MaxKeyBytes+1) }),
			wantErr: "base_request.key is 1537 bytes, at most 1536"},
		{name: "no owner", key: good, owner: "", entry: entry("s3://b/x", 1), wantErr: "owner_id is required", only: []string{"reserve", "release"}},
		{name: "no output URI", key: good, owner: "o", entry: cache.Entry{}, wantErr: "output_uri is required", only: []string{"put"}},
		{name: "negative heartbeat", key: good, owner: "o", entry: entry("s3://b/x", 1), hb: -time.Second,
			wantErr: "heartbeat interval -1s is negative", only: []string{"reserve"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			owner, e := tc.owner, tc.entry
			if tc.only == nil {
				owner, e = "o", entry("s3://b/x", 1)
			}
			calls := map[string]func() error{
				"get":    func() error { _, err := c.Get(ctx, tc.key); return err },
				"put":    func() error { _, err := c.Put(ctx, tc.key, e); return err },
				"delete": func() error { return c.Delete(ctx, tc.key) },
				"reserve": func() error {
					_, err := c.GetOrExtendReservation(ctx, tc.key, owner, tc.hb)
					return err
				},
				"release": func() error { return c.ReleaseReservation(ctx, tc.key, owner) },
			}
			for name, call := range calls {
				err := call()
				if tc.only != nil && !slices.Contains(tc.only, name) {
					if err != nil {
						t.Errorf("%s: unexpected error %v", name, err)
					}
					continue
				}
				if !errors.Is(err, cache.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s: got %v, want an ErrInvalid containing %q", name, err, tc.wantErr)
				}
			}
		})
	}
}

// TestClientNeverBlocks: a hung or absent service costs at most the per-call
// timeout, and it is an error, not a miss.
func TestClientNeverBlocks(t *testing.T) {
	// The handler reads the body so the server notices the client leaving;
	// stop ends it regardless, so hung.Close does not wait on it.
	stop := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(stop) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()

	key := cache.Key{Org: "o", Project: "p", Domain: "d", Key: "k"}
	cases := []struct {
		name    string
		url     string
		opts    []cache.Option
		maxTime time.Duration
	}{
		{"hung service, short timeout", hung.URL, []cache.Option{cache.WithTimeout(200 * time.Millisecond)}, 1500 * time.Millisecond},
		{"hung service, default timeout", hung.URL, nil, cache.DefaultTimeout + 1500*time.Millisecond},
		{"nothing listening", closed, nil, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cache.NewClient(tc.url, nil, tc.opts...)
			calls := map[string]func(context.Context) error{
				"get": func(ctx context.Context) error {
					e, err := c.Get(ctx, key)
					if err == nil && e == nil {
						return errors.New("reported a miss")
					}
					return err
				},
				"put": func(ctx context.Context) error { _, err := c.Put(ctx, key, entry("s3://b/x", 1)); return err },
				"reserve": func(ctx context.Context) error {
					_, err := c.GetOrExtendReservation(ctx, key, "o", time.Second)
					return err
				},
				"release": func(ctx context.Context) error { return c.ReleaseReservation(ctx, key, "o") },
			}
			// Concurrently: each call is bounded on its own.
			var wg sync.WaitGroup
			for name, call := range calls {
				wg.Go(func() {
					start := time.Now()
					err := call(context.Background())
					if err == nil || strings.Contains(err.Error(), "reported a miss") {
						t.Errorf("%s: want an error, got %v", name, err)
					}
					if d := time.Since(start); d > tc.maxTime {
						t.Errorf("%s: took %s, want at most %s", name, d, tc.maxTime)
					}
				})
			}
			wg.Wait()
		})
	}

	t.Run("the caller's shorter deadline wins", func(t *testing.T) {
		c := cache.NewClient(hung.URL, nil, cache.WithTimeout(time.Minute))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := c.Get(ctx, key); err == nil {
			t.Fatal("want an error")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("took %s", d)
		}
	})
}
