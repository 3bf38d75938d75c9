package p2p

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

func readOne(raw []byte, max int) (WireFrame, error) {
	return ReadFrame(bufio.NewReader(bytes.NewReader(raw)), max)
}

func TestReadFrame(t *testing.T) {
	uv := func(n uint64) []byte { return binary.AppendUvarint(nil, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name    string
		raw     []byte
		want    WireFrame
		wantErr error
	}{
		{"message", AppendFrame(nil, KindMessage, 0, []byte("hi")), WireFrame{KindMessage, 0, []byte("hi")}, nil},
		{"empty message", AppendFrame(nil, KindMessage, 0, nil), WireFrame{KindMessage, 0, []byte{}}, nil},
		{"call", AppendFrame(nil, KindCall, 300, []byte("req")), WireFrame{KindCall, 300, []byte("req")}, nil},
		{"reply", AppendFrame(nil, KindReply, 1<<63, []byte("x")), WireFrame{KindReply, 1 << 63, []byte("x")}, nil},
		{"error", AppendFrame(nil, KindError, 7, []byte("boom")), WireFrame{KindError, 7, []byte("boom")}, nil},
		{"cancel", AppendFrame(nil, KindCancel, 7, nil), WireFrame{KindCancel, 7, []byte{}}, nil},
		{"clean eof", nil, WireFrame{}, io.EOF},
		{"zero length", []byte{0}, WireFrame{}, ErrBadFrame},
		{"shorter than header", []byte{2, 1, 0}, WireFrame{}, ErrBadFrame},
		{"too large", cat(uv(101), make([]byte, 101)), WireFrame{}, ErrFrameTooLarge},
		{"huge length", uv(1 << 62), WireFrame{}, ErrFrameTooLarge},
		{"varint overflow", bytes.Repeat([]byte{0xff}, 11), WireFrame{}, ErrFrameTooLarge},
		{"truncated length", []byte{0x80}, WireFrame{}, ErrBadFrame},
		{"truncated body", cat(uv(10), []byte{1, 0, 0, 'a'}), WireFrame{}, ErrBadFrame},
		{"wrong version", []byte{3, 2, 0, 0}, WireFrame{}, ErrBadFrame},
		{"unknown kind", []byte{3, 1, 5, 0}, WireFrame{}, ErrBadFrame},
		{"message with id", []byte{3, 1, 0, 5}, WireFrame{}, ErrBadFrame},
		{"bad id varint", []byte{3, 1, 1, 0x80}, WireFrame{}, ErrBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readOne(tt.raw, 100)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadFrame(%x) error = %v; want %v", tt.raw, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got.Kind != tt.want.Kind || got.ID != tt.want.ID || !bytes.Equal(got.Payload, tt.want.Payload) {
				t.Errorf("ReadFrame(%x) = %+v; want %+v", tt.raw, got, tt.want)
			}
		})
	}
}

func TestReadFrameSequence(t *testing.T) {
	var buf []byte
	for i := range 100 {
		buf = AppendFrame(buf, KindCall, uint64(i+1), bytes.Repeat([]byte{byte(i)}, i))
	}
	r := bufio.NewReader(bytes.NewReader(buf))
	for i := range 100 {
		f, err := ReadFrame(r, 1024)
		if err != nil || f.ID != uint64(i+1) || len(f.Payload) != i {
			t.Fatalf("frame %d = %+v, %v", i, f, err)
		}
	}
	if _, err := ReadFrame(r, 1024); err != io.EOF {
		t.Fatalf("after last frame: %v; want io.EOF", err)
	}
}

// A peer that announces a frame of the maximum size and then stalls must not
// make the reader allocate the whole frame up front.
func TestReadFrameAllocatesAsDataArrives(t *testing.T) {
	const max = 64 << 20
	raw := binary.AppendUvarint(nil, max)
	raw = append(raw, 1, 0, 0, 'a', 'b')
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readOne(raw, max)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBadFrame) {
		t.Fatalf("ReadFrame(truncated 64 MiB frame) = %v; want ErrBadFrame", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("allocated %d bytes for a 5-byte partial frame; want < 1 MiB", got)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{}, byte(0), uint64(0), []byte("hello"))
	f.Add(AppendFrame(nil, KindCall, 9, []byte("req")), byte(1), uint64(9), []byte{})
	f.Add(AppendFrame(AppendFrame(nil, KindReply, 1, nil), KindError, 2, []byte("e")), byte(3), uint64(1<<40), []byte("x"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, byte(2), uint64(5), bytes.Repeat([]byte{7}, 300))
	f.Add([]byte{3, 2, 0, 0}, byte(7), uint64(0), []byte(nil))
	const max = 256
	f.Fuzz(func(t *testing.T, raw []byte, kind byte, id uint64, payload []byte) {
		r := bufio.NewReader(bytes.NewReader(raw))
		for range len(raw) + 1 {
			fr, err := ReadFrame(r, max)
			if err != nil {
				break
			}
			if cap(fr.Payload) > max || !fr.Kind.valid() {
				t.Fatalf("ReadFrame = kind %d, cap %d; want a valid kind and cap <= %d", fr.Kind, cap(fr.Payload), max)
			}
		}
		k := Kind(kind % 4)
		if k == KindMessage {
			id = 0
		}
		if frameLen(id, len(payload)) > max {
			return
		}
		enc := AppendFrame(nil, k, id, payload)
		r = bufio.NewReader(bytes.NewReader(enc))
		got, err := ReadFrame(r, max)
		if err != nil || got.Kind != k || got.ID != id || !bytes.Equal(got.Payload, payload) {
			t.Fatalf("round trip of (%v, %d, %x) = %+v, %v", k, id, payload, got, err)
		}
		if _, err := ReadFrame(r, max); err != io.EOF {
			t.Fatalf("after one frame: %v; want io.EOF", err)
		}
	})
}
