package main

import "runtime/debug"

// gcPercent is the peer's GOGC when the environment sets none.
//
// Most of a peer's live heap is Badger's memtable arenas (64 MiB each, one
// to three of them): under the default GOGC of 100 the rest of the heap
// may grow by as much again, 150-250 MiB, before a collection, so a busy
// peer allocates from memory it has never touched, and every page of it
// faults in (expensive in a virtual machine). At 25 it cycles through
// 40-60 MiB it keeps mapped, and the arenas, which hold no pointers, cost
// a collection little to mark. needle bench, same hour, GOGC 100 against
// 25: W1 on 3 peers 8,500-8,900 against 10,400-12,400 tasks/s, on one
// peer 17,300-20,000 against 22,500-25,400 (CPU per task 20-28% lower);
// with no collection at all (GOGC=off) 6,500.
const gcPercent = 25

// tuneGC sets gcPercent unless GOGC is set, which wins. It returns the
// percent in force when it set one, -1 when it left the runtime's.
func tuneGC(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		return -1
	}
	debug.SetGCPercent(gcPercent)
	return gcPercent
}
