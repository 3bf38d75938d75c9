package hugepages

import (
	"runtime"
	"runtime/metrics"
)

// DefaultPrefault is the heap a peer faults in at start (needled, after
// its WAL is open): about what a fresh peer's heap grows by over its first
// few thousand tasks.
const DefaultPrefault = 32 << 20

// Prefault faults in n bytes of fresh heap now and gives them back to the
// runtime as free memory it keeps, so that the heap's next n bytes of
// growth take no page fault. It returns the bytes the runtime holds free
// afterwards.
//
// Why: on huge pages the first write to each 2 MiB of fresh heap is a
// fault that zeroes the whole page, 1-2 ms in a virtual machine whose host
// has not backed that memory yet, and a fresh peer's heap grows by a few
// such pages per thousand tasks while it fills its caches. The write that
// faults is a request's: under W2 those faults made most of the 1% of
// requests slower than 4 ms (docs/performance.md). Faulted here, at start,
// they cost the peer's start some tens of milliseconds and no request.
//
// The runtime hands out the lowest free pages first, so these are the
// pages the heap grows into next. It keeps free memory up to a tenth over
// the heap's goal and gives the rest back to the system in the
// background; a peer's goal counts Badger's memtable arena (about 1.3
// times the memtable: 166 MiB at needled's 128 MiB), so the pages stay.
// Call it after the WAL is open: an arena allocated later could take
// these pages, and the runtime would clear them all for it (a dirty page
// is zeroed when it is allocated again; a fresh one is not).
func Prefault(n int) uint64 {
	if n > 0 {
		touch(n)
		runtime.GC() // the slice is garbage: its pages are free again
	}
	return heapFree()
}

// touch allocates n bytes and writes one byte in every 4 KiB of them.
//
//go:noinline
func touch(n int) {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
}

// heapFree is the heap memory the runtime holds free and has not given
// back to the system, bytes (0 if it cannot tell).
func heapFree() uint64 { return runtimeBytes("/memory/classes/heap/free:bytes") }

// runtimeBytes reads the runtime metric name, bytes (0 if this runtime
// does not have it).
func runtimeBytes(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
