package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// BenchmarkNextDeadline asks a lone peer of 256 partitions with work in
// every partition for its deadline: the runtime does so once per loop
// iteration.
func BenchmarkNextDeadline(b *testing.B) {
	h := newHarness(b, 256)
	h.tick(10 * time.Millisecond)
	for i := range 512 {
		h.submit(shard.GroupSpec{ID: shard.GroupID(fmt.Sprintf("g%d", i)), Mode: shard.ModeParallel, Tasks: echoTasks(4)})
	}
	h.tick(time.Millisecond)
	b.ResetTimer()
	for range b.N {
		_ = h.n.NextDeadline()
	}
}
