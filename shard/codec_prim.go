package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrCodec is wrapped by every decode error: the input is truncated, has
// trailing bytes, or holds a value the format does not allow. The error's
// text names the field that failed ("shard: decode batch.events[3].result:
// length 100 exceeds 5 remaining bytes").
var ErrCodec = errors.New("shard: malformed encoding")

// decodeError is a decode failure: path names the field (dotted, built from
// the innermost field outwards), msg says what was wrong with it.
type decodeError struct {
	path string
	msg  string
}

func (e *decodeError) Error() string {
	if e.path == "" {
		return "shard: decode: " + e.msg
	}
	return "shard: decode " + e.path + ": " + e.msg
}

func (e *decodeError) Unwrap() error { return ErrCodec }

// Times are encoded as a varint of Unix nanoseconds. Code 0 is the zero
// time.Time and code math.MinInt64 is the Unix epoch itself; instants
// outside the int64 nanosecond range (before 1677-09-21, after 2262-04-11)
// are clamped to its ends, so one instant, math.MinInt64 ns, is never
// produced by the encoder.
const (
	timeEpochCode = math.MinInt64
	timeMinNanos  = math.MinInt64 + 1
	timeMaxNanos  = math.MaxInt64
)

var (
	timeMin = time.Unix(0, timeMinNanos)
	timeMax = time.Unix(0, timeMaxNanos)
)

// AppendString appends s as a uvarint length followed by its bytes.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBytes appends b as a uvarint length followed by its bytes. Nil and
// empty slices encode alike and decode as nil.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendTime appends t as a varint of Unix nanoseconds; the zero time
// encodes as 0. Only the instant survives: location and monotonic reading
// are dropped and Decoder.Time returns UTC, so a time produced by
// time.Unix(0, n).UTC() round-trips to an == equal value. Instants outside
// the years 1678-2262 are clamped to that range.
func AppendTime(dst []byte, t time.Time) []byte {
	return binary.AppendVarint(dst, timeCode(t))
}

func timeCode(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	// Seconds strictly inside these bounds have nanoseconds in range.
	if s := t.Unix(); s > math.MinInt64/1_000_000_000 && s < math.MaxInt64/1_000_000_000 {
		if n := t.UnixNano(); n != 0 {
			return n
		}
		return timeEpochCode
	}
	switch {
	case t.Before(timeMin):
		return timeMinNanos
	case t.After(timeMax):
		return timeMaxNanos
	}
	return t.UnixNano() // within a second of the range ends: not the epoch
}

// Decoder reads the primitives written by AppendString, AppendBytes,
// AppendTime and encoding/binary's AppendUvarint/AppendVarint. Its error is
// sticky: after the first failure every method returns the zero value and
// Err reports that failure. It never panics, checks every length and count
// against the input left before allocating, and copies what it returns, so
// the input may be reused after decoding.
//
// Decoder has a String method that consumes input: do not print a Decoder
// with fmt.
type Decoder struct {
	p   []byte
	err error
	// v1 is set when reading data written before the group and task
	// extensions (batch version 1, snapshot versions 1-3).
	v1 bool
	// reuse is set when the task specs of submitted groups are decoded
	// into room (DecodeBatchReusing); clear, each group allocates its own.
	reuse bool
	room  []TaskSpec
}

// NewDecoder returns a Decoder reading p.
func NewDecoder(p []byte) Decoder { return Decoder{p: p} }

// Err returns the first failure, or nil. Every non-nil error wraps ErrCodec.
func (d *Decoder) Err() error { return d.err }

// Len returns the number of input bytes left.
func (d *Decoder) Len() int { return len(d.p) }

// Fail records a failure with a message formatted like fmt.Sprintf, unless
// the decoder has already failed. Use it for values that decode but are not
// allowed (an unknown enum value).
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = &decodeError{msg: fmt.Sprintf(format, args...)}
	}
}

// Field names the field just read: if the decoder failed and the failure has
// no field name yet, it gets name. Call it after reading each field. It
// reports whether the decoder is still without error.
func (d *Decoder) Field(name string) bool {
	if d.err == nil {
		return true
	}
	if e, ok := d.err.(*decodeError); ok && e.path == "" {
		e.path = name
	}
	return false
}

// within prefixes the failure's field path with the name of the enclosing
// structure ("batch" + "events[3].result").
func (d *Decoder) within(name string) {
	e, ok := d.err.(*decodeError)
	switch {
	case !ok:
	case e.path == "":
		e.path = name
	default:
		e.path = name + "." + e.path
	}
}

// withinIndex is within for the i-th element of a list.
func (d *Decoder) withinIndex(list string, i int) {
	if d.err != nil {
		d.within(fmt.Sprintf("%s[%d]", list, i))
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.p) == 0 {
		d.err = &decodeError{msg: "unexpected end of input"}
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.p) > 0 && d.p[0] < 0x80 {
		v := uint64(d.p[0])
		d.p = d.p[1:]
		return v
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.varintError(n)
		return 0
	}
	d.p = d.p[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.varintError(n)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *Decoder) varintError(n int) {
	if n == 0 {
		d.err = &decodeError{msg: "unexpected end of input in varint"}
	} else {
		d.err = &decodeError{msg: "varint overflows 64 bits"}
	}
}

// Int reads a varint that must fit in an int.
func (d *Decoder) Int() int {
	v := d.Varint()
	if int64(int(v)) != v {
		d.Fail("%d overflows int", v)
		return 0
	}
	return int(v)
}

// int32 reads a varint that must fit in an int32.
func (d *Decoder) int32() int32 {
	v := d.Varint()
	if int64(int32(v)) != v {
		d.Fail("%d overflows int32", v)
		return 0
	}
	return int32(v)
}

// Count reads a list length for elements that take at least minSize bytes
// each (minSize >= 1), and fails unless that many elements can fit in the
// input left, so that a hostile count cannot make the caller allocate.
func (d *Decoder) Count(minSize int) int {
	n := d.Uvarint()
	if d.err != nil {
		return 0
	}
	if limit := uint64(len(d.p) / max(minSize, 1)); n > limit {
		d.Fail("count %d exceeds the %d that fit in %d remaining bytes", n, limit, len(d.p))
		return 0
	}
	return int(n)
}

// next reads a length prefix and returns that many bytes of the input, not
// copied.
func (d *Decoder) next() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.Fail("length %d exceeds %d remaining bytes", n, len(d.p))
		return nil
	}
	b := d.p[:n:n]
	d.p = d.p[n:]
	return b
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	b := d.next()
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

// StringReuse is String, but returns prev without allocating when the string
// read equals prev. Use it for values that repeat from one record to the next
// (a group id, a handler name).
func (d *Decoder) StringReuse(prev string) string {
	b := d.next()
	if string(b) == prev {
		return prev
	}
	return string(b)
}

// Bytes reads a length-prefixed byte string into a new slice; empty decodes
// as nil.
func (d *Decoder) Bytes() []byte {
	b := d.next()
	if len(b) == 0 {
		return nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	return out
}

// Time reads a time written by AppendTime: the zero time, or an instant in
// UTC without monotonic reading.
func (d *Decoder) Time() time.Time { return stamp(d.Varint()).time() }

// stamp is an instant as AppendTime encodes it (timeCode): 0 for the zero
// time, Unix nanoseconds otherwise. It keeps what a decoded time.Time
// holds (the instant, in UTC) in 8 bytes without a pointer.
type stamp int64

func stampOf(t time.Time) stamp { return stamp(timeCode(t)) }

// time returns the instant as Decoder.Time would.
func (s stamp) time() time.Time {
	switch s {
	case 0:
		return time.Time{}
	case timeEpochCode:
		return time.Unix(0, 0).UTC()
	default:
		return time.Unix(0, int64(s)).UTC()
	}
}

// nanos returns the instant in Unix nanoseconds (0 for the zero time).
func (s stamp) nanos() int64 {
	if s == timeEpochCode {
		return 0
	}
	return int64(s)
}

// append appends s as AppendTime appends its instant.
func (s stamp) append(dst []byte) []byte { return binary.AppendVarint(dst, int64(s)) }

// uint31 reads a uvarint that must fit in a non-negative int32.
func (d *Decoder) uint31() int {
	v := d.Uvarint()
	if v > math.MaxInt32 {
		d.Fail("%d is over %d", v, math.MaxInt32)
		return 0
	}
	return int(v)
}
