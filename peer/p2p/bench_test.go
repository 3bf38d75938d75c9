package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// benchPair starts two quiet loopback hosts, b joined to a, over transport
// ("tcp" or "quic-v1").
func benchPair(b *testing.B, transport string) (x, y *Host) {
	quiet := slog.New(slog.DiscardHandler)
	x = mustHost(b, Config{Logger: quiet, QueueLen: 1 << 14, InboundLen: 1 << 12})
	y = mustHost(b, Config{Logger: quiet, QueueLen: 1 << 14, InboundLen: 1 << 12})
	if err := y.Connect(b.Context(), addrOf(b, x, transport)); err != nil {
		b.Fatal(err)
	}
	return x, y
}

// BenchmarkSend measures one-way throughput: b.N frames from y to x, timed
// until the last one is received.
func BenchmarkSend(b *testing.B) {
	for _, transport := range []string{"tcp", "quic-v1"} {
		for _, size := range []int{64, 4 << 10} {
			b.Run(fmt.Sprintf("%s/%dB", transport, size), func(b *testing.B) {
				x, y := benchPair(b, transport)
				payload := make([]byte, size)
				// window bounds the frames in flight below QueueLen, so the
				// sender waits for the receiver instead of spinning on
				// ErrQueueFull.
				window := make(chan struct{}, 1<<13)
				done := make(chan struct{})
				b.SetBytes(int64(size))
				b.ResetTimer()
				go func() {
					defer close(done)
					for range b.N {
						<-x.Inbound()
						<-window
					}
				}()
				for range b.N {
					window <- struct{}{}
					if err := y.Send(x.ID(), payload); err != nil {
						b.Fatal(err)
					}
				}
				<-done
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
			})
		}
	}
}

// BenchmarkCall measures the round trip of one 64-byte call at a time.
func BenchmarkCall(b *testing.B) {
	for _, transport := range []string{"tcp", "quic-v1"} {
		b.Run(transport, func(b *testing.B) {
			x, y := benchPair(b, transport)
			x.HandleCall(func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil })
			req := make([]byte, 64)
			if _, err := y.Call(b.Context(), x.ID(), req); err != nil { // opens both streams
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := y.Call(b.Context(), x.ID(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallParallel measures calls from many goroutines sharing one
// stream per direction.
func BenchmarkCallParallel(b *testing.B) {
	x, y := benchPair(b, "tcp")
	x.HandleCall(func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil })
	req := make([]byte, 64)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := y.Call(context.Background(), x.ID(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPingPong measures the peer-to-peer hop of a Raft message, from
// one loop's Send to the other loop's Inbound: x Sends 64 bytes, y's
// Inbound receives them and Sends them back, x's Inbound receives the
// answer, one round trip at a time. With sync, each side writes and
// fdatasyncs a small file as a peer's loop does for an append: y when the
// frame arrives, before answering (a follower), and x right after its Send
// (a leader's own write), so the frames go out while their loop is in the
// system call. The metrics are per hop: out (x to y) and back.
func BenchmarkPingPong(b *testing.B) {
	for _, transport := range []string{"tcp", "quic-v1"} {
		for _, sync := range []bool{false, true} {
			name := transport
			if sync {
				name += "/sync"
			}
			b.Run(name, func(b *testing.B) { pingPong(b, transport, sync) })
		}
	}
}

func pingPong(b *testing.B, transport string, sync bool) {
	x, y := benchPair(b, transport)
	fsync, ySync := func() {}, func() {}
	if sync {
		fsync, ySync = syncer(b), syncer(b)
	}
	// y's loop reports when it had each frame and when it sent the answer.
	type times struct{ got, sent time.Time }
	at := make(chan times, 1)
	stopped := make(chan struct{}) // y's loop gave up
	go func() {
		defer close(stopped)
		for {
			select {
			case f := <-y.Inbound():
				got := time.Now()
				ySync()
				sent := time.Now()
				if err := y.Send(f.From, f.Data); err != nil {
					b.Error(err)
					return
				}
				at <- times{got, sent}
			case <-b.Context().Done():
				return
			}
		}
	}()
	payload := make([]byte, 64)
	var out, back []time.Duration // x to y, then y to x
	round := func() {
		start := time.Now()
		if err := x.Send(y.ID(), payload); err != nil {
			b.Fatal(err)
		}
		fsync()
		select {
		case <-x.Inbound():
		case <-stopped:
			b.FailNow()
		}
		end := time.Now()
		t := <-at
		out, back = append(out, t.got.Sub(start)), append(back, end.Sub(t.sent))
	}
	round() // opens both streams
	out, back = out[:0], back[:0]
	b.ResetTimer()
	for range b.N {
		round()
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"out", out}, {"back", back}} {
		slices.Sort(m.d)
		us := func(q float64) float64 { return float64(m.d[int(q*float64(len(m.d)-1))]) / 1e3 }
		b.ReportMetric(us(0.5), m.name+"-p50-us")
		b.ReportMetric(us(0.9), m.name+"-p90-us")
	}
}

// syncer returns a function that writes 300 bytes to a file of its own
// and fdatasyncs it, as a peer's WAL does for an append.
func syncer(b *testing.B) func() {
	f, err := os.Create(filepath.Join(b.TempDir(), "wal"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	rec := make([]byte, 300)
	return func() {
		if _, err := f.Write(rec); err != nil {
			b.Error(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Error(err)
		}
	}
}
