package steal

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0).UTC()

// mustThief returns a Thief with the default config, seed, and mod applied.
func mustThief(tb testing.TB, seed uint64, mod func(*Config)) *Thief {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(seed, 99))
	if mod != nil {
		mod(&cfg)
	}
	th, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return th
}

// idle is the load of a thief "me" with free idle slots and no READY task.
func idle(free int) Load { return Load{Peer: "me", Slots: free} }

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" for none
	}{
		{"default", func(*Config) {}, ""},
		{"no rand", func(c *Config) { c.Rand = nil }, "Rand"},
		{"zero batch", func(c *Config) { c.MaxBatch = 0 }, "MaxBatch"},
		{"zero stale", func(c *Config) { c.StaleAfter = 0 }, "StaleAfter"},
		{"zero backoff", func(c *Config) { c.BackoffMin = 0 }, "BackoffMin"},
		{"max below min", func(c *Config) { c.BackoffMax = c.BackoffMin - 1 }, "BackoffMax"},
		{"zero ttl", func(c *Config) { c.RequestTTL = 0 }, "RequestTTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mod(&cfg)
			_, err := New(cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New() = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) ||
				!strings.HasPrefix(err.Error(), "steal: ")):
				t.Fatalf("New() = %v; want a steal: error about %s", err, tt.want)
			}
		})
	}
}

func TestNextEligibility(t *testing.T) {
	fresh := t0.Add(-time.Second)
	tests := []struct {
		name  string
		loads []Load
		back  []string // refused once just before t0
		want  string   // "" when Next must not steal
	}{
		{"nobody", nil, nil, ""},
		{"only self", []Load{{Peer: "me", Ready: 9, Slots: 1, At: fresh}}, nil, ""},
		{"self and one", []Load{{Peer: "me", Ready: 9, At: fresh}, {Peer: "a", Ready: 1, At: fresh}}, nil, "a"},
		{"stale", []Load{{Peer: "a", Ready: 9, At: t0.Add(-3*time.Second - 1)}}, nil, ""},
		{"just fresh", []Load{{Peer: "a", Ready: 9, At: t0.Add(-3 * time.Second)}}, nil, "a"},
		{"from the future", []Load{{Peer: "a", Ready: 9, At: t0.Add(time.Second)}}, nil, "a"},
		{"zero ready", []Load{{Peer: "a", Slots: 2, Running: 2, At: fresh}}, nil, ""},
		{"backed off", []Load{{Peer: "a", Ready: 9, At: fresh}}, []string{"a"}, ""},
		{"one of many", []Load{
			{Peer: "me", Ready: 50, At: fresh},
			{Peer: "a", Ready: 40, At: t0.Add(-time.Hour)},
			{Peer: "b", Ready: 0, At: fresh},
			{Peer: "c", Ready: 30, At: fresh},
			{Peer: "d", Ready: 1, At: fresh},
		}, []string{"c"}, "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(20) {
				th := mustThief(t, seed, nil)
				for _, l := range tt.loads {
					th.Observe(l)
				}
				for _, p := range tt.back {
					th.Refused(t0.Add(-time.Millisecond), p)
				}
				v, n, ok := th.Next(t0, idle(2))
				if v != tt.want || ok != (tt.want != "") || (ok && n < 1) {
					t.Fatalf("seed %d: Next() = %q, %d, %v; want %q", seed, v, n, ok, tt.want)
				}
			}
		})
	}
}

func TestNextPicksMoreLoadedOfTwo(t *testing.T) {
	th := mustThief(t, 1, nil)
	for _, l := range []Load{{Peer: "a", Ready: 10}, {Peer: "b", Ready: 5}, {Peer: "c", Ready: 1}} {
		l.Slots, l.At = 2, t0
		th.Observe(l)
	}
	got := map[string]int{}
	for range 3000 {
		v, _, ok := th.Next(t0, idle(1))
		if !ok {
			t.Fatal("Next() = false; want a victim")
		}
		got[v]++
		th.Granted(t0, v, 1)
	}
	// Pairs (a,b) (a,c) (b,c) are equally likely: a wins 2/3, b 1/3, c never.
	if got["c"] != 0 || got["a"] < 1800 || got["a"] > 2200 || got["b"] < 800 || got["b"] > 1200 {
		t.Fatalf("victims = %v; want a ~2000, b ~1000, c 0", got)
	}
}

func TestNextTieBreaks(t *testing.T) {
	tests := []struct {
		name string
		a, b Load
		want string
	}{
		{"more ready", Load{Peer: "a", Ready: 4, Slots: 1}, Load{Peer: "b", Ready: 5, Slots: 8}, "b"},
		{"more per slot", Load{Peer: "a", Ready: 4, Slots: 4}, Load{Peer: "b", Ready: 4, Slots: 2}, "b"},
		{"no slots is most loaded", Load{Peer: "a", Ready: 4, Slots: 1}, Load{Peer: "b", Ready: 4}, "b"},
		{"lexical", Load{Peer: "b", Ready: 4, Slots: 2}, Load{Peer: "a", Ready: 4, Slots: 2}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(20) {
				th := mustThief(t, seed, nil)
				tt.a.At, tt.b.At = t0, t0
				th.Observe(tt.a)
				th.Observe(tt.b)
				if v, _, _ := th.Next(t0, idle(1)); v != tt.want {
					t.Fatalf("seed %d: Next() = %q; want %q", seed, v, tt.want)
				}
			}
		})
	}
}

func TestNextSize(t *testing.T) {
	tests := []struct {
		name                  string
		ready, free, maxBatch int
		want                  int
	}{
		{"half of ready", 10, 8, 64, 5},
		{"at least one", 1, 4, 64, 1},
		{"prefetch cap", 100, 3, 64, 3 * Prefetch},
		{"max batch", 1000, 100, 64, 64},
		{"max batch 1", 1000, 100, 1, 1},
		{"odd ready", 7, 8, 64, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := mustThief(t, 1, func(c *Config) { c.MaxBatch = tt.maxBatch })
			th.Observe(Load{Peer: "a", Ready: tt.ready, Slots: 1, At: t0})
			if _, n, _ := th.Next(t0, idle(tt.free)); n != tt.want {
				t.Fatalf("Next(ready %d, free %d) n = %d; want %d", tt.ready, tt.free, n, tt.want)
			}
		})
	}
}

func TestNextBusyNeverSteals(t *testing.T) {
	tests := []struct {
		name string
		self Load
	}{
		{"no free slot", Load{Peer: "me", Slots: 2, Running: 2}},
		{"overcommitted", Load{Peer: "me", Slots: 2, Running: 5}},
		{"no slots at all", Load{Peer: "me"}},
		{"local ready", Load{Peer: "me", Slots: 2, Ready: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := mustThief(t, 1, nil)
			th.Observe(Load{Peer: "a", Ready: 100, Slots: 1, At: t0})
			for i := range 100 {
				if v, _, ok := th.Next(t0.Add(time.Duration(i)*time.Millisecond), tt.self); ok {
					t.Fatalf("Next(%+v) = %q; want no steal", tt.self, v)
				}
			}
			if s := th.Stats(); s.Asked != 0 {
				t.Fatalf("Stats().Asked = %d; want 0", s.Asked)
			}
		})
	}
}

func TestNextOutstanding(t *testing.T) {
	th := mustThief(t, 1, nil)
	th.Observe(Load{Peer: "a", Ready: 100, Slots: 1, At: t0})
	th.Observe(Load{Peer: "b", Ready: 10, Slots: 1, At: t0})
	v, _, ok := th.Next(t0, idle(2))
	if !ok || v != "a" {
		t.Fatalf("Next() = %q, %v; want a", v, ok)
	}
	ttl := DefaultConfig().RequestTTL
	if v, _, ok := th.Next(t0.Add(ttl-1), idle(2)); ok {
		t.Fatalf("Next() before RequestTTL = %q; want nothing while a request is outstanding", v)
	}
	// Abandoned at RequestTTL: a backs off, b is asked at once.
	if v, _, ok := th.Next(t0.Add(ttl), idle(2)); !ok || v != "b" {
		t.Fatalf("Next() at RequestTTL = %q, %v; want b", v, ok)
	}
	if s := th.Stats(); s.Asked != 2 || s.Expired != 1 {
		t.Fatalf("Stats() = %+v; want Asked 2, Expired 1", s)
	}
	// A late reply from a leaves the request to b outstanding.
	th.Granted(t0.Add(ttl+1), "a", 3)
	if got, _, _ := th.Outstanding(); got != "b" {
		t.Fatalf("Outstanding() = %q; want b", got)
	}
	th.Granted(t0.Add(ttl+2), "b", 1)
	if v, _, ok := th.Next(t0.Add(ttl+3), idle(2)); !ok || v != "a" {
		t.Fatalf("Next() after replies = %q, %v; want a (its late grant ended its backoff)", v, ok)
	}
}

func TestNextAsksSameVictimAfterTTL(t *testing.T) {
	th := mustThief(t, 1, nil)
	th.Observe(Load{Peer: "a", Ready: 100, Slots: 1, At: t0})
	cfg := DefaultConfig()
	th.Next(t0, idle(1))
	at := t0.Add(cfg.RequestTTL)
	if _, _, ok := th.Next(at, idle(1)); ok {
		t.Fatal("Next() at RequestTTL asked a again; want its backoff first")
	}
	if v, _, ok := th.Next(at.Add(cfg.BackoffMin), idle(1)); !ok || v != "a" {
		t.Fatalf("Next() after backoff = %q, %v; want a", v, ok)
	}
}

func TestBackoffDoublesAndResets(t *testing.T) {
	cfg := DefaultConfig()
	th := mustThief(t, 1, nil)
	now := t0
	th.Observe(Load{Peer: "a", Ready: 100, Slots: 1, At: now})
	want := cfg.BackoffMin
	for i := range 10 {
		th.Observe(Load{Peer: "a", Ready: 100, Slots: 1, At: now})
		if _, _, ok := th.Next(now, idle(1)); !ok {
			t.Fatalf("refusal %d: Next() = false; want a", i)
		}
		if i%2 == 0 {
			th.Refused(now, "a")
		} else {
			th.Granted(now, "a", 0) // an empty grant is a refusal
		}
		if got := th.BackoffUntil("a").Sub(now); got != want {
			t.Fatalf("refusal %d: backoff = %v; want %v", i, got, want)
		}
		if _, _, ok := th.Next(now.Add(want-1), idle(1)); ok {
			t.Fatalf("refusal %d: Next() during backoff = true", i)
		}
		now = now.Add(want)
		want = min(2*want, cfg.BackoffMax)
	}
	th.Observe(Load{Peer: "a", Ready: 100, Slots: 1, At: now})
	th.Next(now, idle(1))
	th.Granted(now, "a", 2)
	if got := th.BackoffUntil("a"); !got.IsZero() {
		t.Fatalf("BackoffUntil after a grant = %v; want zero", got)
	}
	th.Next(now, idle(1))
	th.Refused(now, "a")
	if got := th.BackoffUntil("a").Sub(now); got != cfg.BackoffMin {
		t.Fatalf("backoff after reset = %v; want %v", got, cfg.BackoffMin)
	}
	if s := th.Stats(); s.Asked != 12 || s.Refused != 11 || s.Granted != 1 || s.Stolen != 2 {
		t.Fatalf("Stats() = %+v", s)
	}
}

func TestObserveKeepsLatest(t *testing.T) {
	th := mustThief(t, 1, nil)
	th.Observe(Load{Peer: "a", Ready: 5, At: t0})
	th.Observe(Load{Peer: "a", Ready: 0, At: t0.Add(-time.Millisecond)}) // late gossip
	th.Observe(Load{Ready: 5, At: t0})                                   // no peer: ignored
	if v, _, ok := th.Next(t0, idle(1)); !ok || v != "a" {
		t.Fatalf("Next() = %q, %v; want a (older load ignored)", v, ok)
	}
	th.Refused(t0, "a")
	th.Observe(Load{Peer: "a", Ready: 0, At: t0.Add(time.Millisecond)})
	if v, _, ok := th.Next(t0.Add(time.Second), idle(1)); ok {
		t.Fatalf("Next() = %q; want nothing (a now has no READY task)", v)
	}
}

func TestForget(t *testing.T) {
	th := mustThief(t, 1, nil)
	th.Observe(Load{Peer: "a", Ready: 5, At: t0})
	th.Observe(Load{Peer: "b", Ready: 1, At: t0})
	if v, _, _ := th.Next(t0, idle(1)); v != "a" {
		t.Fatalf("Next() = %q; want a", v)
	}
	th.Forget("a")
	if _, _, ok := th.Outstanding(); ok {
		t.Fatal("Outstanding() after Forget of its victim = true")
	}
	th.Refused(t0, "a") // a late reply from a forgotten peer
	if _, known := th.load("a"); known || !th.BackoffUntil("a").IsZero() || len(th.peers) != 1 {
		t.Fatalf("after Forget: peers %v", th.peers)
	}
	if v, _, ok := th.Next(t0, idle(1)); !ok || v != "b" {
		t.Fatalf("Next() = %q, %v; want b", v, ok)
	}
}

func TestDeterminism(t *testing.T) {
	run := func() []string {
		th := mustThief(t, 42, nil)
		r := rand.New(rand.NewPCG(7, 7))
		var out []string
		now := t0
		for i := range 2000 {
			now = now.Add(time.Duration(r.IntN(20)) * time.Millisecond)
			p := string(rune('a' + r.IntN(20)))
			th.Observe(Load{Peer: p, Ready: r.IntN(50), Slots: 2, At: now})
			if v, n, ok := th.Next(now, idle(1+i%3)); ok {
				out = append(out, fmt.Sprintf("%s:%d", v, n))
				if r.IntN(3) == 0 {
					th.Refused(now, v)
				} else {
					th.Granted(now, v, n)
				}
			}
		}
		return out
	}
	a, b := run(), run()
	if len(a) < 100 || !slices.Equal(a, b) {
		t.Fatalf("two runs with the same seed differ (or stole too little: %d)", len(a))
	}
}

// Ask records a request made outside Next: it is outstanding like one
// from Next, refused while another is in flight or the victim backs off,
// and expires at RequestTTL through Pending.
func TestAskOutsideNext(t *testing.T) {
	th := mustThief(t, 1, nil)
	th.Observe(Load{Peer: "a", Ready: 5, Slots: 1, At: t0})
	th.Observe(Load{Peer: "owner", Ready: 1, Slots: 1, At: t0}) // its stranded task
	cfg := DefaultConfig()
	if !th.Ask(t0, "owner") {
		t.Fatal("Ask(owner) = false with nothing in flight")
	}
	if v, ok := th.Pending(t0); !ok || v != "owner" {
		t.Fatalf("Pending() = %q, %v; want owner", v, ok)
	}
	if th.Ask(t0, "a") {
		t.Fatal("Ask(a) = true while the request to owner is in flight")
	}
	if v, _, ok := th.Next(t0, idle(1)); ok {
		t.Fatalf("Next() = %q while the request to owner is in flight", v)
	}
	th.Refused(t0.Add(time.Millisecond), "owner")
	if th.Ask(t0.Add(2*time.Millisecond), "owner") {
		t.Fatal("Ask(owner) = true during the backoff its refusal started")
	}
	if !th.Ask(t0.Add(cfg.BackoffMin+time.Millisecond), "owner") {
		t.Fatal("Ask(owner) = false after its backoff")
	}
	at := t0.Add(cfg.BackoffMin + time.Millisecond + cfg.RequestTTL)
	if v, ok := th.Pending(at); ok {
		t.Fatalf("Pending() at RequestTTL = %q; want the request abandoned", v)
	}
	if s := th.Stats(); s.Asked != 2 || s.Refused != 1 || s.Expired != 1 {
		t.Fatalf("Stats() = %+v; want Asked 2, Refused 1, Expired 1", s)
	}
}

// A backoff earned asking a peer with nothing to give ends when that peer
// is next seen with READY work: an idle mesh's blind asks double it to
// seconds, and the first backlog waited that long for its thieves. A
// peer that refuses while it holds READY tasks stays in backoff.
func TestBackoffEndsWhenWorkArrives(t *testing.T) {
	th := mustThief(t, 1, nil)
	now := t0
	for range 6 { // blind asks of an idle mesh, each refused
		v, _, ok := th.Sample(now, idle(2), []string{"a", "me"}, func(int) bool { return true })
		if !ok || v != "a" {
			t.Fatalf("Sample() = %q, %v; want a", v, ok)
		}
		th.Refused(now, "a")
		th.Observe(Load{Peer: "a", Slots: 2, At: now}) // the refusal's load: nothing READY
		now = now.Add(time.Minute)                     // past the sample wait (SampleMax)
	}
	refusedAt := now.Add(-time.Second)
	th.Refused(refusedAt, "a")
	if th.BackoffUntil("a").Sub(refusedAt) < time.Second {
		t.Fatalf("backoff after 7 refusals = %v; want >= 1s", th.BackoffUntil("a").Sub(refusedAt))
	}
	at := refusedAt.Add(time.Millisecond)
	th.Observe(Load{Peer: "a", Ready: 300, Slots: 2, At: at})
	if v, n, ok := th.Next(at, idle(2)); !ok || v != "a" || n != 4 {
		t.Fatalf("Next() after a's work arrived = %q, %d, %v; want a, 4, true", v, n, ok)
	}

	// Refused while it advertises READY work: the backoff stands, and a
	// later load with work is no news.
	th.Refused(at, "a")
	th.Observe(Load{Peer: "a", Ready: 299, Slots: 2, At: at.Add(time.Millisecond)})
	if v, _, ok := th.Next(at.Add(time.Millisecond), idle(2)); ok {
		t.Fatalf("Next() = %q during the backoff of a loaded peer's refusal; want nothing", v)
	}
	if until := th.BackoffUntil("a"); until.IsZero() {
		t.Fatal("BackoffUntil(a) is zero after a loaded peer's refusal")
	}
}
