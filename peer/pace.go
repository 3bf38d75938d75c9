package peer

import "time"

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
}

const paceWeight = 0.05

func ewma(avg float64, sample time.Duration) float64 {
	if avg == 0 {
		return float64(sample)
	}
	return avg + paceWeight*(float64(sample)-avg)
}

func (p *pacer) ran(d time.Duration) {
	if d > 0 {
		p.run = ewma(p.run, d)
	}
}

func (p *pacer) committed(d time.Duration) {
	if d >= 0 {
		p.commit = ewma(p.commit, max(d, time.Microsecond))
	}
}

// ahead returns how many leases to hold beyond slots, capped at
// slots*factor.
func (p *pacer) ahead(slots, factor int) int {
	if p.run == 0 || p.commit == 0 || factor <= 0 {
		return 0
	}
	n := int(float64(slots) * p.commit / p.run)
	return min(n, slots*factor)
}
