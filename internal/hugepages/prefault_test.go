package hugepages

import (
	"runtime"
	"testing"
)

// TestPrefaultLeavesFreeHeap checks that Prefault's bytes end up free in
// the heap and held, neither kept alive nor given back to the system: a
// large live object (never touched, as a peer's memtable arena) puts the
// heap's goal far above them, as in a peer.
func TestPrefaultLeavesFreeHeap(t *testing.T) {
	live := make([]byte, 256<<20)
	const n = 16 << 20
	before := heapFree()
	after := Prefault(n)
	runtime.KeepAlive(live)
	if after < n {
		t.Fatalf("heap free after Prefault(%d) = %d (before %d): want at least %d", n, after, before, n)
	}
	if before < n/4 && after < before+n*3/4 {
		t.Fatalf("heap free after Prefault(%d) = %d, before %d: want at least %d more", n, after, before, n*3/4)
	}
}
