package node

import (
	"math"
	"time"
)

// pacer sizes how many leases a peer holds beyond its slots. A lease costs a
// commit (a Raft round and a WAL sync) before its handler can start; when
// handlers are short next to that, slots idle between commits. By Little's
// law, keeping slots * commit/run extra leases queued locally hides the
// commit latency. Long tasks get no lease-ahead, so READY work stays in the
// owner's queue where idle peers can steal it.
//
// Both averages are exponentially weighted over what the node observed; the
// durations come in as inputs (outcomes carry the handler's run time, and
// commit latency is the node's own clock between proposing and applying).
type pacer struct {
	run    float64 // mean handler run time, ns
	commit float64 // mean lease commit latency, ns
	steal  float64 // mean steal round trip (request to grant), ns
	// slow is the longest run lately seen, ns: it rises to a longer run
	// at once and decays toward shorter ones by slowDecay a run.
	slow float64
}

const paceWeight = 0.05

func ewma(avg float64, sample time.Duration) float64 {
	if avg == 0 {
		return float64(sample)
	}
	return avg + paceWeight*(float64(sample)-avg)
}

func (p *pacer) ran(d time.Duration) {
	if d <= 0 {
		return
	}
	p.run = ewma(p.run, d)
	if float64(d) >= p.slow {
		p.slow = float64(d)
	} else {
		p.slow += slowDecay * (float64(d) - p.slow)
	}
}

// slowDecay is how far the longest run lately seen moves toward a shorter
// run: a hundred short runs take it two thirds of the way.
const slowDecay = 0.01

func (p *pacer) committed(d time.Duration) {
	if d >= 0 {
		p.commit = ewma(p.commit, max(d, time.Microsecond))
	}
}

func (p *pacer) stole(d time.Duration) {
	if d >= 0 {
		p.steal = ewma(p.steal, max(d, time.Microsecond))
	}
}

// ahead returns how many leases to hold beyond slots, capped at
// slots*factor: slots * commit/run, rounded up (a slot that finishes must
// find its next lease already committed).
func (p *pacer) ahead(slots, factor int) int {
	return p.extra(stealCover*p.commit, slots, factor)
}

// stealAhead is ahead for stolen work: the latency to hide is the steal's
// round trip (request, victim's commit, grant).
func (p *pacer) stealAhead(slots, factor int) int {
	return p.extra(stealCover*p.steal, slots, factor)
}

// stealCover is how many mean latencies (a steal's round trip, a lease's
// commit) the leases held ahead cover. One is Little's law on the mean;
// latencies vary (a slow fsync, a busy loop), and a peer that runs dry
// before its next lease arrives idles its slots, so it keeps two.
const stealCover = 2

func (p *pacer) extra(latency float64, slots, factor int) int {
	if p.run == 0 || latency == 0 || factor <= 0 || slots <= 0 || latency*aheadWorth < p.run {
		return 0
	}
	n := int(math.Ceil(float64(slots) * latency / p.run))
	return min(n, slots*factor)
}

// aheadWorth bounds lease-ahead to tasks shorter than aheadWorth times the
// latency it hides. Past that, slots idle less than 1/aheadWorth of the
// time between tasks without it, and a lease held ahead waits in the local
// queue behind a whole run while its expiry (the task's timeout plus
// grace) runs: the simulator's batch workload (tasks of seconds to a
// minute, 90 s timeouts) had a task leased ahead 58 times, each lease
// expiring before it started. Rounding slots*latency/run up had made every
// peer hold a lease ahead whatever its tasks' length.
const aheadWorth = 100

// backlogDrainCommits is how many commit latencies a local backlog must
// take to drain before short tasks are worth shipping to a thief.
const backlogDrainCommits = 8

// backlogged reports whether ready tasks of the mean run time would keep
// slots busy for more than backlogDrainCommits commit latencies.
func (p *pacer) backlogged(ready, slots int) bool {
	if p.run == 0 || p.commit == 0 || slots <= 0 {
		return false
	}
	return float64(ready)*p.run/float64(slots) > backlogDrainCommits*p.commit
}
