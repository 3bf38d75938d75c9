package badgerwal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Key layout. Every stored value is split into chunks of at most chunkSize
// payload bytes; the Badger key of a chunk is its base key followed by the
// chunk number (4 bytes, big endian).
//
//	p <part:4> e <index:8>  Raft entry (proto raftpb.Entry)
//	p <part:4> h            hard state (proto raftpb.HardState)
//	p <part:4> s            snapshot metadata (proto raftpb.Snapshot, Data cleared)
//	p <part:4> d            snapshot data (raw bytes)
//	o <len:4> <key>         outbox record
//	m <len:4> <key>         meta record
//
// Outbox and meta keys carry their length so that one key's chunks are
// contiguous in key order and a prefix scan for one key sees no other key.
const (
	prefixPart   = 'p'
	prefixOutbox = 'o'
	prefixMeta   = 'm'

	kindEntry     = 'e'
	kindHardState = 'h'
	kindSnapMeta  = 's'
	kindSnapData  = 'd'

	partKeyLen  = 1 + 4 + 1      // p <part> <kind>
	entryKeyLen = partKeyLen + 8 // ... <index>
	chunkNumLen = 4
)

// Value framing of one chunk:
//
//	[0]    format version (formatVersion)
//	[1:5]  CRC32C over base key, chunk number, chunk count and payload
//	[5:9]  chunk count of the whole value (big endian)
//	[9:]   payload bytes of this chunk
const (
	formatVersion = 1
	headerLen     = 1 + 4 + 4
	// chunkSize keeps every Badger value below the value threshold, so all
	// data lives in the memtable WAL and the LSM and never in the value log
	// (whose file rotation Badger does not fsync when SyncWrites is off).
	chunkSize = 256 << 10
	// maxChunks bounds a chunk count read from disk (1 TiB values).
	maxChunks = 1 << 22
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// partKey returns the base key of a per-partition record kind.
func partKey(p uint32, kind byte) []byte {
	k := make([]byte, partKeyLen, entryKeyLen)
	k[0] = prefixPart
	binary.BigEndian.PutUint32(k[1:5], p)
	k[5] = kind
	return k
}

// entryKey returns the base key of entry i of partition p.
func entryKey(p uint32, i uint64) []byte {
	return binary.BigEndian.AppendUint64(partKey(p, kindEntry), i)
}

// namedKey returns the base key of an outbox or meta record.
func namedKey(prefix byte, key string) []byte {
	k := make([]byte, 0, 1+4+len(key))
	k = append(k, prefix)
	k = binary.BigEndian.AppendUint32(k, uint32(len(key)))
	return append(k, key...)
}

// parseNamedKey returns the record key of a namedKey base key.
func parseNamedKey(base []byte) (string, bool) {
	if len(base) < 5 {
		return "", false
	}
	n := binary.BigEndian.Uint32(base[1:5])
	if uint64(len(base)-5) != uint64(n) {
		return "", false
	}
	return string(base[5:]), true
}

// chunkKey appends chunk number c to a base key (in a fresh slice).
func chunkKey(base []byte, c uint32) []byte {
	k := make([]byte, len(base), len(base)+chunkNumLen)
	copy(k, base)
	return binary.BigEndian.AppendUint32(k, c)
}

// splitChunkKey splits a stored key into its base key and chunk number.
func splitChunkKey(k []byte) (base []byte, c uint32, ok bool) {
	if len(k) < chunkNumLen+1 {
		return nil, 0, false
	}
	n := len(k) - chunkNumLen
	return k[:n], binary.BigEndian.Uint32(k[n:]), true
}

// chunkCount is the number of chunks a payload of n bytes is stored in.
// An empty payload still takes one chunk.
func chunkCount(n int) int {
	if n == 0 {
		return 1
	}
	return (n + chunkSize - 1) / chunkSize
}

// encodeChunks frames payload as the values of its chunks under base.
func encodeChunks(base, payload []byte) [][]byte {
	n := chunkCount(len(payload))
	out := make([][]byte, n)
	for c := range n {
		lo := c * chunkSize
		hi := min(lo+chunkSize, len(payload))
		v := make([]byte, headerLen+hi-lo)
		copy(v[headerLen:], payload[lo:hi])
		frameChunk(base, uint32(c), uint32(n), v)
		out[c] = v
	}
	return out
}

// frameChunk fills the header of v, chunk c of n under base, whose
// payload follows the header in v.
func frameChunk(base []byte, c, n uint32, v []byte) {
	v[0] = formatVersion
	binary.BigEndian.PutUint32(v[5:9], n)
	binary.BigEndian.PutUint32(v[1:5], chunkCRC(base, c, v[5:]))
}

// encodeMessage is encodeChunks of m's encoding (marshal). A message that
// fits one chunk, as a Raft entry of up to 256 KB does, is encoded in
// place behind the chunk's header, in room from alloc (the transaction's
// arena): no allocation and one copy of the entry fewer for every entry a
// replica writes.
func encodeMessage(base []byte, m message, alloc func(n int) []byte) [][]byte {
	size := m.Size()
	if size > chunkSize {
		return encodeChunks(base, marshal(m))
	}
	v := alloc(headerLen + size)[:headerLen+size]
	n, err := m.MarshalToSizedBuffer(v[headerLen:])
	if err != nil || n != size {
		panic(fmt.Sprintf("badgerwal: invariant: marshal %T: %d bytes of %d: %v", m, n, size, err))
	}
	frameChunk(base, 0, 1, v)
	return [][]byte{v}
}

// chunkCRC is the checksum of one chunk: it covers the key so that a value
// stored under the wrong key is caught too.
func chunkCRC(base []byte, c uint32, countAndPayload []byte) uint32 {
	var num [chunkNumLen]byte
	binary.BigEndian.PutUint32(num[:], c)
	crc := crc32.Update(0, castagnoli, base)
	crc = crc32.Update(crc, castagnoli, num[:])
	return crc32.Update(crc, castagnoli, countAndPayload)
}

// assembler rebuilds one value from its chunks, read in key order.
type assembler struct {
	base    []byte
	count   uint32
	next    uint32
	payload []byte
}

// add checks and appends the value of chunk c. It returns a reason string
// (for a wal.CorruptError) when the chunk is bad.
func (a *assembler) add(c uint32, v []byte) string {
	switch {
	case len(v) < headerLen:
		return fmt.Sprintf("chunk %d truncated (%d bytes)", c, len(v))
	case v[0] != formatVersion:
		return fmt.Sprintf("chunk %d has unknown format version %d", c, v[0])
	case binary.BigEndian.Uint32(v[1:5]) != chunkCRC(a.base, c, v[5:]):
		return fmt.Sprintf("chunk %d checksum mismatch", c)
	}
	n := binary.BigEndian.Uint32(v[5:9])
	switch {
	case c != a.next:
		return fmt.Sprintf("chunk %d found, want chunk %d", c, a.next)
	case n == 0 || (a.next > 0 && n != a.count):
		return fmt.Sprintf("chunk %d has inconsistent chunk count %d", c, n)
	case c >= n:
		return fmt.Sprintf("chunk %d beyond chunk count %d", c, n)
	}
	a.count = n
	a.next++
	a.payload = append(a.payload, v[headerLen:]...)
	return ""
}

// done reports a reason when chunks are missing at the end.
func (a *assembler) done() string {
	if a.next == 0 || a.next != a.count {
		return fmt.Sprintf("value truncated: %d of %d chunks", a.next, a.count)
	}
	return ""
}

// message is a raftpb message: its generated code encodes it (no maps,
// so always the same bytes for the same message) and decodes it.
type message interface {
	Size() int
	Marshal() ([]byte, error)
	MarshalToSizedBuffer(b []byte) (int, error)
}

// marshal encodes a raftpb message. Encoding one cannot fail; a failure
// is a programmer error.
func marshal(m message) []byte {
	b, err := m.Marshal()
	if err != nil {
		panic(fmt.Sprintf("badgerwal: invariant: marshal %T: %v", m, err))
	}
	return b
}
