package simulate

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestEventQueueOrder checks that the queue pops events in (at, seq)
// order, pushes and pops interleaved, with many events at the same time:
// a run is a function of the seed only if ties pop in scheduling order.
func TestEventQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q eventQueue
	var want []event
	seq := uint64(0)
	var got []event
	for range 20_000 {
		if rng.IntN(3) > 0 || q.Len() == 0 {
			seq++
			e := event{at: time.Duration(rng.IntN(50)), seq: seq}
			q.push(e)
			want = append(want, e)
			continue
		}
		got = append(got, q.pop())
	}
	for q.Len() > 0 {
		got = append(got, q.pop())
	}
	// Replay: at each pop the earliest of what was pushed and not popped.
	var pending []event
	k := 0
	seq = 0
	rng = rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		if rng.IntN(3) > 0 || len(pending) == 0 {
			rng.IntN(50)
			pending = append(pending, want[seq])
			seq++
			continue
		}
		i := earliest(pending)
		if got[k].at != pending[i].at || got[k].seq != pending[i].seq {
			t.Fatalf("pop %d: got (%v, %d), want (%v, %d)", k, got[k].at, got[k].seq, pending[i].at, pending[i].seq)
		}
		pending = slices.Delete(pending, i, i+1)
		k++
	}
	slices.SortFunc(pending, func(a, b event) int {
		if a.before(&b) {
			return -1
		}
		return 1
	})
	for _, e := range pending {
		if got[k].at != e.at || got[k].seq != e.seq {
			t.Fatalf("pop %d: got (%v, %d), want (%v, %d)", k, got[k].at, got[k].seq, e.at, e.seq)
		}
		k++
	}
}

func earliest(es []event) int {
	best := 0
	for i := range es {
		if es[i].before(&es[best]) {
			best = i
		}
	}
	return best
}

// TestSimNextOrder checks that events scheduled for now (sim.soon) and
// later (the heap) come out of next in (at, seq) order, the clock moving
// to each event's time as the loop moves it.
func TestSimNextOrder(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		s := &sim{}
		type ref struct {
			at  time.Duration
			seq uint64
		}
		var pending []ref
		for step := range 5_000 {
			if rng.IntN(2) == 0 || len(pending) == 0 {
				d := time.Duration(0)
				if rng.IntN(2) == 0 {
					d = time.Duration(rng.IntN(3))
				}
				s.after(d, nil)
				pending = append(pending, ref{s.now + d, s.seq})
				continue
			}
			best := 0
			for i, r := range pending {
				if r.at < pending[best].at || r.at == pending[best].at && r.seq < pending[best].seq {
					best = i
				}
			}
			ev := s.next()
			if ev.at != pending[best].at || ev.seq != pending[best].seq {
				t.Fatalf("seed %d step %d: next is (%v, %d), want (%v, %d)", seed, step, ev.at, ev.seq, pending[best].at, pending[best].seq)
			}
			s.now = ev.at
			pending = slices.Delete(pending, best, best+1)
		}
		if s.pending() != len(pending) {
			t.Fatalf("seed %d: %d pending, want %d", seed, s.pending(), len(pending))
		}
	}
}
