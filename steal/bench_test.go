package steal

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkNext measures one Next plus the Granted that answers it, with 3
// and 100 known loaded peers.
func BenchmarkNext(b *testing.B) {
	for _, peers := range []int{3, 100} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			th := mustThief(b, 1, nil)
			for i := range peers {
				th.Observe(Load{Peer: fmt.Sprintf("peer-%03d", i), Ready: 10 + i%17, Slots: 4, At: t0})
			}
			self := idle(2)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now := t0.Add(time.Duration(i%1000) * time.Microsecond)
				v, _, ok := th.Next(now, self)
				if !ok {
					b.Fatal("Next() = false")
				}
				th.Granted(now, v, 1)
				i++
			}
		})
	}
}
