package p2p

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// A peer writing garbage on the protocol gets its stream reset; the host
// stays up and keeps serving the same peer's well-formed traffic.
func TestHostileStream(t *testing.T) {
	a, b := pair(t, Config{MaxFrame: 1 << 20})
	tests := []struct {
		name string
		raw  []byte
	}{
		{"huge length", binary.AppendUvarint(nil, 1<<40)},
		{"just over max", binary.AppendUvarint(nil, 1<<20+1)},
		{"wrong version", []byte{3, 9, 0, 0}},
		{"unknown kind", []byte{3, 1, 200, 0}},
		{"zero length", []byte{0}},
		{"truncated", []byte{10, 1, 0, 0, 'x'}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := b.host.NewStream(t.Context(), a.self, ProtocolID)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Reset()
			if _, err := s.Write(tt.raw); err != nil {
				t.Fatal(err)
			}
			s.CloseWrite() // ends the truncated case; harmless for the others
			s.SetReadDeadline(time.Now().Add(testTimeout))
			_, err = s.Read(make([]byte, 1))
			if !errors.Is(err, network.ErrReset) {
				t.Fatalf("read after %s = %v; want a stream reset", tt.name, err)
			}
			if got := a.Stats().BadFrames; got != uint64(i+1) {
				t.Errorf("BadFrames = %d; want %d", got, i+1)
			}
		})
	}
	if err := b.Send(a.ID(), []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); string(f.Data) != "still here" {
		t.Fatalf("after hostile streams got %q; want %q", f.Data, "still here")
	}
}
