package node

import (
	"fmt"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// TestIDRing: the ring keeps the last bound ids pushed, drops them oldest
// first, and keeps its order across the copies it grows by.
func TestIDRing(t *testing.T) {
	const bound = 200 // not a power of two: the last growth is to the bound
	var q idRing
	var want []shard.TaskID // the ids the ring should hold, oldest first
	for i := range 1000 {
		id := shard.TaskID(fmt.Sprintf("g.%d", i))
		dropped, full := q.push(id, bound)
		want = append(want, id)
		if len(want) > bound {
			if !full || dropped != want[0] {
				t.Fatalf("push %d: dropped %q, %v; want %q", i, dropped, full, want[0])
			}
			want = want[1:]
		} else if full {
			t.Fatalf("push %d: dropped %q below the bound", i, dropped)
		}
		if len(q.buf) > bound || q.n != len(want) {
			t.Fatalf("push %d: %d held in %d; want %d in at most %d", i, q.n, len(q.buf), len(want), bound)
		}
		for j, w := range want {
			if got := q.buf[(q.head+j)%len(q.buf)]; got != w {
				t.Fatalf("push %d: position %d holds %q; want %q", i, j, got, w)
			}
		}
	}
}
