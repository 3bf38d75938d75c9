package steal

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var fuzzPeers = []string{"me", "a", "b", "c", "d", "e"}

// FuzzThief drives a Thief with a sequence of Observe, Next, Granted,
// Refused, Forget and clock steps decoded from the input, and checks Next's
// guarantees (doc.go) and the Thief's bookkeeping after every call.
func FuzzThief(f *testing.F) {
	f.Add(uint64(1), []byte{0, 13, 0, 200, 1, 1, 2, 1, 1, 1, 3, 2, 5, 9, 1, 1})
	f.Add(uint64(7), []byte{0, 7, 0, 8, 0, 9, 1, 2, 5, 200, 1, 2, 4, 1, 1, 2})
	f.Add(uint64(42), slices.Repeat([]byte{0, 31, 1, 1, 3, 1, 5, 5}, 20))
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		cfg := DefaultConfig()
		cfg.Rand = rand.New(rand.NewPCG(seed, seed>>7))
		cfg.MaxBatch = 1 + int(seed%8)
		th, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%7, int(ops[i+1])
			peer := fuzzPeers[arg%len(fuzzPeers)]
			switch op {
			case 0:
				th.Observe(Load{Peer: peer, Ready: arg / 6 % 5 * (arg % 7), Running: arg % 3,
					Slots: arg % 4, At: now.Add(-time.Duration(arg%5) * time.Second)})
			case 1:
				self := Load{Peer: "me", Slots: arg % 4, Running: arg / 4 % 3, Ready: arg / 12 % 2}
				fuzzNext(t, th, now, self)
			case 2:
				th.Granted(now, peer, arg/6%3)
			case 3:
				th.Refused(now, peer)
			case 4:
				th.Forget(peer)
			case 5:
				now = now.Add(time.Duration(arg) * 10 * time.Millisecond)
			case 6:
				th.NotNow(now, peer)
				if th.Ahead(now) {
					t.Fatalf("Ahead right after a not-now from %s", peer)
				}
			}
			fuzzCheck(t, th)
		}
	})
}

// fuzzNext calls Next and checks its result against the state before.
func fuzzNext(t *testing.T, th *Thief, now time.Time, self Load) {
	_, since, busy := th.Outstanding()
	busy = busy && now.Sub(since) < th.cfg.RequestTTL
	v, n, ok := th.Next(now, self)
	if !ok {
		if v != "" || n != 0 {
			t.Fatalf("Next() = %q, %d, false; want zero values", v, n)
		}
		return
	}
	l, known := th.load(v)
	switch {
	case busy:
		t.Fatalf("Next() = %q while a request is outstanding", v)
	case self.Free() <= 0 || self.Ready > 0:
		t.Fatalf("Next(%+v) = %q; want no steal when busy", self, v)
	case v == self.Peer:
		t.Fatalf("Next() returned self")
	case n < 1 || n > th.cfg.MaxBatch:
		t.Fatalf("Next() n = %d; want in [1, %d]", n, th.cfg.MaxBatch)
	case !known || l.Ready <= 0 || now.Sub(l.At) > th.cfg.StaleAfter:
		t.Fatalf("Next() = %q with load %+v (known %v); want a fresh loaded peer", v, l, known)
	case th.BackoffUntil(v).After(now):
		t.Fatalf("Next() = %q in backoff until %v", v, th.BackoffUntil(v))
	}
	if got, _, _ := th.Outstanding(); got != v {
		t.Fatalf("Outstanding() = %q after Next() = %q", got, v)
	}
}

// fuzzCheck checks the Thief's bookkeeping: peers without duplicates or
// empty ids, each where the index says, the count of loaded peers right,
// and the counters consistent.
func fuzzCheck(t *testing.T, th *Thief) {
	loaded := 0
	for i, p := range th.peers {
		if j, ok := th.byID[p.load.Peer]; p.load.Peer == "" || !ok || j != i {
			t.Fatalf("peer %q at %d indexed at %d (%v)", p.load.Peer, i, j, ok)
		}
		loaded += b2i(p.load.Ready > 0)
	}
	if len(th.byID) != len(th.peers) || loaded != th.loaded {
		t.Fatalf("index of %d for %d peers, %d loaded counted %d", len(th.byID), len(th.peers), loaded, th.loaded)
	}
	if s := th.Stats(); s.Granted+s.Refused+s.Expired > s.Asked+s.Granted+s.Refused || s.Asked < 0 {
		t.Fatalf("Stats() = %+v", s)
	}
}

// load returns the load held for peer.
func (t *Thief) load(peer string) (Load, bool) {
	i, ok := t.find(peer)
	if !ok {
		return Load{}, false
	}
	return t.peers[i].load, true
}
