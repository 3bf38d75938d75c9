package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestNextRemovalCached drives a leader through random submissions,
// outcomes, retention removals (some left in flight, some dropped as a
// proposal Raft refused, some committed), group ids reused after removal,
// and restores, and checks after every step that NextDue's cached next
// removal is the one a walk of the finished groups finds, and that the
// counts by state Counts answers are those of a walk over the groups.
func TestNextRemovalCached(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 9))
			cfg := DefaultConfig()
			cfg.Rand = rand.New(rand.NewPCG(seed, 7))
			cfg.Retention, cfg.RemoveBatch = 10*time.Second, 2
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s.SetLeader(true, t0)
			o := &owner{tb: t, s: s, now: t0}
			var flight []Event // removals proposed, not committed yet
			for step := range 300 {
				switch k := r.IntN(7); k {
				case 0, 1: // a group, often reusing the id of a removed one
					id := GroupID(fmt.Sprintf("g%d", r.IntN(40)))
					if !s.HasGroup(id) {
						o.submit(GroupSpec{ID: id, Mode: ModeParallel, Tasks: []TaskSpec{{Handler: "h"}, {Handler: "h"}}})
					}
				case 2:
					for _, id := range o.lease(1+r.IntN(3), "w") {
						_ = o.report(id, "w", r.IntN(4) > 0, true)
					}
				case 3:
					o.now = o.now.Add(time.Duration(r.IntN(8000)) * time.Millisecond)
					flight = append(flight, s.Due(o.now)...)
				case 4: // the removals commit
					o.commit(flight...)
					flight = nil
				case 5: // Raft refused them
					s.Unlease(flight)
					flight = nil
				case 6:
					if r.IntN(10) == 0 { // a follower's restart from a snapshot, then leading again
						o.commit(flight...)
						flight = nil
						if err := s.Restore(s.Snapshot()); err != nil {
							t.Fatal(err)
						}
						s.SetLeader(true, o.now)
					}
				}
				if got, want := s.counts, s.walkCounts(); got != want {
					t.Fatalf("step %d: counts by state %v; a walk over the groups finds %v", step, got, want)
				}
				got, gotOK := s.nextRemoval()
				want, wantOK, _ := s.findNextRemoval()
				if got != want || gotOK != wantOK {
					t.Fatalf("step %d: cached next removal %v, %v; a walk finds %v, %v", step, got, gotOK, want, wantOK)
				}
			}
		})
	}
}

// walkCounts is Counts by a walk over the groups, what Shard.counts keeps.
func (s *Shard) walkCounts() (c [numStates]int) {
	for _, g := range s.groups {
		for st, n := range g.counts {
			c[st] += n
		}
	}
	return c
}
