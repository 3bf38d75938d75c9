package simulate

import (
	"os"
	"sync"
	"testing"
	"time"
)

// TestMeasure prints the speed numbers (MEASURE=1): w1 10k tasks on 1 and
// 5 peers, and 1,000 seeds of the default scenario on 2 workers.
func TestMeasure(t *testing.T) {
	if os.Getenv("MEASURE") == "" {
		t.Skip()
	}
	for _, peers := range []int{1, 5} {
		r := mustRun(t, Config{Seed: 1, Peers: peers, Tasks: 10000, Workload: "w1"})
		t.Logf("w1 peers=%d 10k: %s", peers, r.Text())
	}
	for _, peers := range []int{1, 3} {
		start := time.Now()
		var mu sync.Mutex
		var tot Totals
		inv := map[string]int{}
		var wg sync.WaitGroup
		ch := make(chan uint64)
		for range 2 {
			wg.Go(func() {
				for s := range ch {
					cfg := DefaultConfig()
					cfg.Seed, cfg.Peers = s, peers
					r, _ := Run(cfg)
					mu.Lock()
					tot.Add(&r)
					if r.Failed() {
						inv[r.Violations[0].Invariant]++
					}
					mu.Unlock()
				}
			})
		}
		for s := uint64(1); s <= 1000; s++ {
			ch <- s
		}
		close(ch)
		wg.Wait()
		t.Logf("1000 seeds default peers=%d: wall %.1fs, failing %d %v, sim %.0fs", peers, time.Since(start).Seconds(), len(tot.FailingSeeds), inv, tot.SimSeconds)
	}
}

// BenchmarkRun runs whole simulations: the default scenario, 5 peers
// with 10,000 mixed tasks without faults, and 5 idle peers. Profile with -cpuprofile or
// -memprofile.
func BenchmarkRun(b *testing.B) {
	for _, bb := range []struct {
		name string
		cfg  Config
	}{
		{"default", DefaultConfig()},
		{"peers5-10k", Config{Seed: 1, Peers: 5, Tasks: 10000, Liveness: 10 * time.Minute, Faults: []string{}}},
		{"peers5-idle", Config{Seed: 1, Peers: 5, Workload: "idle", Faults: []string{}}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			var sim float64
			for b.Loop() {
				r := mustRun(b, bb.cfg)
				if r.Failed() {
					b.Fatal(r.Violations[0])
				}
				sim += r.SimSeconds
			}
			b.ReportMetric(sim/b.Elapsed().Seconds(), "x-realtime")
		})
	}
}
