package simulate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Former runs as lease holders. A task's timeout bounds how long a lease
// lasts, so a lease left to a peer's former run (the peer restarted and
// its run of the task is gone) delays the task only by that much, within
// the liveness bound for the simulator's short tasks, while a real
// deployment's hour-long tasks would wait an hour. After the faults heal
// the owners know every restart, so the check is direct: no task stays
// RUNNING under a former run of a peer that is up for longer than
// formerHolderBound.
const (
	formerHolderBound = 15 * time.Second
	formerHolderEvery = 5 // virtual seconds between looks
)

// checkFormerHolders lists the RUNNING tasks of every serving node and
// fails the run when one has been held by a former run of an up peer for
// formerHolderBound since the faults healed.
func (s *sim) checkFormerHolders() {
	if s.now < s.healAt || int(s.now/time.Second)%formerHolderEvery != 0 {
		return
	}
	seen := map[string]string{}
	for _, nd := range s.nodes {
		if !nd.up || nd.paused {
			continue
		}
		f := shard.Filter{States: []shard.State{shard.Running}, Limit: shard.MaxListLimit}
		for {
			r := nd.n.List(&f, false)
			for _, v := range r.Tasks {
				if s.formerRun(v.Holder) {
					seen[string(v.ID)] = v.Holder
				}
			}
			if len(r.Keys) < f.Limit {
				break
			}
			k := r.Keys[len(r.Keys)-1]
			f.After = &k
		}
	}
	for _, id := range slices.Sorted(maps.Keys(seen)) { // in order: a failure names the same task on a replay
		h := seen[id]
		since, ok := s.formerHeld[id]
		if !ok || since.holder != h {
			since = formerSince{holder: h, at: max(s.now, s.healAt)}
		}
		if s.now-since.at >= formerHolderBound {
			s.fail(invLiveness, fmt.Sprintf("task %s RUNNING under %s, a former run of its peer, %v after the faults healed (at %v)",
				id, h, s.now-since.at, s.healAt))
			return
		}
		s.formerHeld[id] = since
	}
	for id := range s.formerHeld {
		if _, ok := seen[id]; !ok {
			delete(s.formerHeld, id)
		}
	}
}

type formerSince struct {
	holder string
	at     time.Duration
}

// formerRun reports whether holder (ID#Boot) names a run of an up peer
// other than its present one.
func (s *sim) formerRun(holder string) bool {
	id, boot, ok := strings.Cut(holder, "#")
	if !ok {
		return false
	}
	i := s.peerIndex(id)
	if i < 0 {
		return false
	}
	nd := s.nodes[i]
	return nd.up && fmt.Sprint(nd.boots) != boot
}
