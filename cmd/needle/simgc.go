package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// A simulation is a batch job whose heap is mostly short-lived Raft
// messages, run by one goroutine: the collector marks on the machine's
// other cores while the run goes on, and what a small run's wall time
// pays for is fresh memory (page faults, zeroed spans) and caches that
// miss in a heap larger than it needs, against the collector's marking
// (its write barriers and assists slow the run, its CPU is the other
// core's). Collecting at 2.5x the live heap (GOGC 150) instead of 5x
// (400) ran 5 peers x 10,000 tasks 9% faster in wall time under mixed
// and batch, 21% under w3; since the heap is on huge pages (2026-12-05)
// fresh memory costs less, and 4x (GOGC 300) takes 6-8% less CPU than
// 2.5x under mixed, w3 and batch, for 10-30 MB more RSS (2026-12-07,
// docs/decisions.md). A large run's live heap is gigabytes, and even 2x of
// it is not memory a machine has to spare (1,000 peers x 1,000,000
// tasks: 3 GB live at the end, 6.1 GiB of RSS under GOGC 400 below 1 GiB
// live and 100 above, 9 GiB under 400 throughout). The collector keeps
// at most simGCRoom above the live heap, down to simGCFloor percent, and
// looks again after every collection: a large run's live heap is mostly
// its tasks, which only grow, and a fixed room costs a collection per
// simGCRoom allocated where the memory saved is the live heap's size
// over again. At the end of a run its checks fill the room with garbage,
// so a run's peak is about its final live heap plus the room: 768 MiB
// brought that run to 3.7 GiB of RSS, 1 GiB to 4.1-4.4 GiB for a little
// less CPU (docs/decisions.md). GOGC, when set, wins.
const (
	simGCPercent = 300
	simGCRoom    = 768 << 20 // heap bytes above the live heap
	simGCFloor   = 25
)

// simGCPercentFor is the GOGC for a live heap of live bytes.
func simGCPercentFor(live uint64) int {
	if live <= simGCRoom*100/simGCPercent {
		return simGCPercent
	}
	return max(simGCFloor, int(simGCRoom*100/live))
}

// simMemLimitFor is the soft memory limit for a live heap of live bytes, 0
// for none: the heap's goal and a quarter of the room for the runtime's
// own memory and the pages it has not returned yet. The goal is reached
// first; the limit is what makes the runtime return the pages a
// collection freed (a large run's RSS was 5.1 GB for a goal of 4.2 GB
// without it).
func simMemLimitFor(live uint64) int64 {
	p := simGCPercentFor(live)
	if p == simGCPercent {
		return 0
	}
	return int64(live + live*uint64(p)/100 + simGCRoom/4)
}

// tuneSimGC sets simGCPercent unless GOGC is set, and after every
// collection sets the percent for the live heap.
func tuneSimGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(simGCPercent)
	armSimGC(simGCPercent)
}

// armSimGC asks for a look at the live heap after the next collection
// (the cleanup of an object nothing holds runs after the collection that
// found it unreachable); cur is the percent set.
func armSimGC(cur int) {
	runtime.AddCleanup(new([16]byte), func(struct{}) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 {
			return // not known to this runtime: leave GOGC as it is
		}
		// A change of a few percent is not worth the world stopped
		// (SetGCPercent stops it).
		live := s[0].Value.Uint64()
		if p := simGCPercentFor(live); p < cur*9/10 || p > cur*11/10 {
			debug.SetGCPercent(p)
			cur = p
		}
		if limit := simMemLimitFor(live); limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(limit)
		}
		armSimGC(cur)
	}, struct{}{})
}
