package p2p

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Wire format of one frame on a stream (see doc.go):
//
//	uvarint length   length of everything below, in bytes (1 <= length <= max)
//	byte    version  frameVersion (1)
//	byte    kind     KindMessage, KindCall, KindReply or KindError
//	uvarint id       correlation id; 0 for KindMessage
//	bytes   payload  length - 2 - len(uvarint id) bytes
const frameVersion = 1

// minFrameBody is the smallest valid body: version, kind and a one-byte id.
const minFrameBody = 3

// readChunk bounds how much ReadFrame allocates ahead of the bytes that have
// actually arrived, so a peer that announces a large frame and then stalls
// costs at most this much memory.
const readChunk = 64 << 10

// Kind says what a frame carries.
type Kind byte

// The kinds of frame. The numeric values are part of the wire format.
const (
	// KindMessage is a one-way message, delivered on Host.Inbound.
	KindMessage Kind = 0
	// KindCall is a request; the receiver answers with KindReply or KindError
	// carrying the same correlation id.
	KindCall Kind = 1
	// KindReply is the successful answer to a KindCall.
	KindReply Kind = 2
	// KindError is a failed answer to a KindCall; the payload is the message.
	KindError Kind = 3
	// KindCancel tells the callee that the caller of the KindCall with the
	// same correlation id stopped waiting (its ctx ended): the handler's
	// ctx is canceled. No payload. Sent only on streams of ProtocolCancel:
	// a host of ProtocolID alone reads an unknown kind and resets the
	// stream.
	KindCancel Kind = 4
)

var kindNames = [...]string{"message", "call", "reply", "error", "cancel"}

// String returns the lower-case name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// valid reports whether k is one of the defined kinds.
func (k Kind) valid() bool { return k <= KindCancel }

// Errors returned by ReadFrame. Both mean the stream can no longer be trusted
// and must be reset.
var (
	// ErrBadFrame reports a malformed frame: zero length, wrong version,
	// unknown kind, bad correlation id or truncated input.
	ErrBadFrame = errors.New("p2p: bad frame")
	// ErrFrameTooLarge reports a frame longer than the configured maximum.
	ErrFrameTooLarge = errors.New("p2p: frame too large")
)

// WireFrame is one decoded frame.
type WireFrame struct {
	// Kind says what the frame carries.
	Kind Kind
	// ID is the correlation id of a call and its reply; 0 for messages.
	ID uint64
	// Payload is the frame's content. It aliases the buffer ReadFrame
	// allocated for this frame only, so the caller may keep it.
	Payload []byte
}

// frameLen returns the length prefix of a frame with this id and payload size.
func frameLen(id uint64, n int) int {
	var tmp [binary.MaxVarintLen64]byte
	return 2 + binary.PutUvarint(tmp[:], id) + n
}

// appendHeader appends everything of a frame but its payload.
func appendHeader(dst []byte, kind Kind, id uint64, n int) []byte {
	dst = binary.AppendUvarint(dst, uint64(frameLen(id, n)))
	dst = append(dst, frameVersion, byte(kind))
	return binary.AppendUvarint(dst, id)
}

// AppendFrame appends the encoding of one frame to dst and returns the
// extended slice.
func AppendFrame(dst []byte, kind Kind, id uint64, payload []byte) []byte {
	dst = appendHeader(dst, kind, id, len(payload))
	return append(dst, payload...)
}

// ReadFrame reads one frame from r. It returns io.EOF, unwrapped, when r ends
// cleanly between two frames; any other error means the stream is broken
// (ErrBadFrame, ErrFrameTooLarge, or the reader's own error). A frame whose
// length exceeds max is rejected before anything is allocated for it, and
// the buffer grows only as bytes arrive.
func ReadFrame(r *bufio.Reader, max int) (WireFrame, error) {
	n, err := readLength(r, max)
	if err != nil {
		return WireFrame{}, err
	}
	body, err := readBody(r, n)
	if err != nil {
		return WireFrame{}, err
	}
	return parseBody(body)
}

// readLength reads the uvarint length prefix and checks it against max. It
// stops as soon as the value exceeds max, so a hostile prefix costs nothing.
func readLength(r io.ByteReader, max int) (int, error) {
	var n uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := r.ReadByte()
		switch {
		case err == io.EOF && i == 0:
			return 0, io.EOF
		case err == io.EOF:
			return 0, fmt.Errorf("%w: truncated length", ErrBadFrame)
		case err != nil:
			return 0, err
		}
		n |= uint64(b&0x7f) << (7 * i)
		if max < 0 || n > uint64(max) || (i == binary.MaxVarintLen64-1 && b > 1) {
			return 0, fmt.Errorf("%w: length exceeds max %d", ErrFrameTooLarge, max)
		}
		if b < 0x80 {
			if n == 0 {
				return 0, fmt.Errorf("%w: zero length", ErrBadFrame)
			}
			if n < minFrameBody {
				return 0, fmt.Errorf("%w: %d-byte frame is shorter than its header", ErrBadFrame, n)
			}
			return int(n), nil
		}
	}
	return 0, fmt.Errorf("%w: length prefix longer than %d bytes", ErrBadFrame, binary.MaxVarintLen64)
}

// readBody reads exactly n bytes, growing its buffer in readChunk steps so the
// allocation follows the data that really arrived. cap(result) == n.
func readBody(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, readChunk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: truncated after %d of %d bytes", ErrBadFrame, len(buf), n)
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// parseBody checks version, kind and id of a frame body read in full.
func parseBody(body []byte) (WireFrame, error) {
	if body[0] != frameVersion {
		return WireFrame{}, fmt.Errorf("%w: version %d, want %d", ErrBadFrame, body[0], frameVersion)
	}
	kind := Kind(body[1])
	if !kind.valid() {
		return WireFrame{}, fmt.Errorf("%w: unknown kind %d", ErrBadFrame, body[1])
	}
	id, k := binary.Uvarint(body[2:])
	if k <= 0 {
		return WireFrame{}, fmt.Errorf("%w: bad correlation id", ErrBadFrame)
	}
	if kind == KindMessage && id != 0 {
		return WireFrame{}, fmt.Errorf("%w: message with correlation id %d", ErrBadFrame, id)
	}
	return WireFrame{Kind: kind, ID: id, Payload: body[2+k:]}, nil
}
