package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// A simulation is a batch job whose heap is mostly short-lived Raft
// messages: collecting at 5x the live heap (GOGC 400) instead of 2x saves
// 15-25% of a small run's CPU for memory it has. A large run's live heap
// is gigabytes, and 5x of it is not memory a machine has to spare (1,000
// peers x 1,000,000 tasks peaked at 9.65 GB): once the live heap passes
// simGCSmall the collector goes back to the runtime's default, as the Go
// compiler does with its own large starting heap. GOGC, when set, wins.
const (
	simGCPercent = 400
	simGCSmall   = 1 << 30 // live heap bytes
)

// simGCPercentFor is the GOGC for a live heap of live bytes.
func simGCPercentFor(live uint64) int {
	if live > simGCSmall {
		return 100
	}
	return simGCPercent
}

// tuneSimGC sets simGCPercent unless GOGC is set, and after every
// collection checks the live heap, until it passes simGCSmall.
func tuneSimGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(simGCPercent)
	armSimGC()
}

// armSimGC asks for a look at the live heap after the next collection
// (the cleanup of an object nothing holds runs after the collection that
// found it unreachable).
func armSimGC() {
	runtime.AddCleanup(new([16]byte), func(struct{}) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 {
			return // not known to this runtime: leave GOGC as it is
		}
		if p := simGCPercentFor(s[0].Value.Uint64()); p != simGCPercent {
			debug.SetGCPercent(p)
			return
		}
		armSimGC()
	}, struct{}{})
}
