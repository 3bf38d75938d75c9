package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
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
