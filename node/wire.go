package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

// ErrWire is wrapped by every decode error.
var ErrWire = errors.New("peer: malformed message")

// Limits on decoded messages, so a hostile frame cannot make a peer
// allocate without bound.
const (
	maxWireList = 1 << 20
)

// AppendMessage encodes m.
func AppendMessage(dst []byte, m *Message) ([]byte, error) {
	dst = append(dst, WireVersion, byte(m.Type))
	dst = shard.AppendString(dst, m.From)
	switch m.Type {
	case MsgRaft:
		dst = binary.AppendUvarint(dst, uint64(len(m.Raft)))
		for _, r := range m.Raft {
			// In place, behind its length: as shard.AppendBytes of the
			// message's encoding, without a buffer of its own.
			size := r.Msg.Size()
			dst = binary.AppendUvarint(dst, uint64(r.Partition))
			dst = binary.AppendUvarint(dst, uint64(size))
			at := len(dst)
			dst = slices.Grow(dst, size)[:at+size]
			n, err := r.Msg.MarshalToSizedBuffer(dst[at:])
			if err != nil {
				return nil, fmt.Errorf("peer: encode raft message: %w", err)
			}
			if n != size {
				return nil, fmt.Errorf("peer: encode raft message: %d bytes, sized %d", n, size)
			}
		}
	case MsgHeartbeat:
		dst = appendHeartbeat(dst, m.Heartbeat)
	case MsgProbe:
		dst = appendProbe(dst, m.Probe)
	case MsgOutcome:
		dst = binary.AppendUvarint(dst, uint64(len(m.Outcomes)))
		for i := range m.Outcomes {
			dst = appendOutcome(dst, &m.Outcomes[i])
		}
	case MsgAck:
		dst = binary.AppendUvarint(dst, uint64(len(m.Acks)))
		for _, a := range m.Acks {
			dst = shard.AppendString(dst, string(a.Task))
			dst = binary.AppendUvarint(dst, uint64(a.Round))
		}
	case MsgStealReq:
		dst = binary.AppendUvarint(dst, uint64(max(m.Want, 0)))
		dst = appendLoad(dst, m.Load)
		dst = shard.AppendString(dst, m.Holder)
	case MsgGrant:
		dst = appendLoad(dst, m.Load)
		if m.NotNow {
			dst = append(dst, 2) // a refusal to an older peer
		} else {
			dst = appendBool(dst, m.Refused)
		}
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for i := range m.Grants {
			dst = appendGrant(dst, &m.Grants[i])
		}
		// Always written (empty on a refusal), so that fields appended
		// after it by a newer peer are not taken for it.
		dst = shard.AppendString(dst, m.Holder)
		// Appended: each grant's attempt, in the order of the grants.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = binary.AppendUvarint(dst, uint64(max(g.Attempt, 0)))
		}
		// Appended: each grant's trace, in the order of the grants.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = shard.AppendString(dst, g.Trace)
		}
		// Appended: each grant's broadcast shard and shard count.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = binary.AppendUvarint(dst, uint64(max(g.Shard, 0)))
			dst = binary.AppendUvarint(dst, uint64(max(g.Shards, 0)))
		}
		// Appended: each grant's required labels.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = appendStrings(dst, g.Require)
		}
		// Appended: each grant's pinned worker.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = shard.AppendString(dst, g.Worker)
		}
		// Appended: each grant's deaths (shard.Deaths.Mark).
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = append(dst, g.Deaths.Mark())
		}
		// Appended: each grant's creation time, name and pin.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for _, g := range m.Grants {
			dst = shard.AppendTime(dst, g.Created)
			dst = shard.AppendString(dst, g.Name)
			dst = shard.AppendString(dst, g.Pin)
		}
		// Appended: each grant's RunInfo.
		dst = binary.AppendUvarint(dst, uint64(len(m.Grants)))
		for i := range m.Grants {
			dst = appendRunInfo(dst, &m.Grants[i].Info)
		}
	case MsgReplicaAsk:
		dst = binary.AppendUvarint(dst, uint64(len(m.Asks)))
		for _, p := range m.Asks {
			dst = binary.AppendUvarint(dst, uint64(p))
		}
	case MsgReplicaGone:
		dst = binary.AppendUvarint(dst, uint64(len(m.Gone)))
		for _, g := range m.Gone {
			dst = binary.AppendUvarint(dst, uint64(g.Partition))
			dst = binary.AppendUvarint(dst, g.Index)
		}
	default:
		return nil, fmt.Errorf("peer: encode: unknown message type %v", m.Type)
	}
	return dst, nil
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendLoad(dst []byte, l Load) []byte {
	dst = binary.AppendUvarint(dst, uint64(max(l.Ready, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(l.Running, 0)))
	return binary.AppendUvarint(dst, uint64(max(l.Slots, 0)))
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = shard.AppendString(dst, s)
	}
	return dst
}

func appendHeartbeat(dst []byte, h *Heartbeat) []byte {
	if h == nil {
		h = &Heartbeat{}
	}
	dst = shard.AppendString(dst, h.Boot)
	dst = binary.AppendUvarint(dst, uint64(max(h.Partitions, 0)))
	dst = appendLoad(dst, h.Load)
	dst = appendStrings(dst, h.Members)
	dst = appendStrings(dst, h.Forgotten)
	dst = appendStrings(dst, h.Addrs)
	dst = appendBool(dst, h.Draining)
	dst = appendStrings(dst, h.Labels)
	dst = binary.AppendUvarint(dst, uint64(max(h.Stranded, 0)))
	dst = appendStrings(dst, h.StrandedFor)
	dst = binary.AppendUvarint(dst, h.Features)
	dst = appendWorkerAds(dst, h.Workers)
	dst = appendWorkerIDs(dst, h.Workers)
	dst = appendPlacement(dst, h)
	dst = binary.AppendUvarint(dst, h.Inc)
	dst = append(dst, h.Sync)
	dst = appendBook(dst, h.Book)
	dst = binary.AppendUvarint(dst, h.Sum)
	dst = shard.AppendString(dst, h.Version)
	dst = appendStrings(dst, h.Recover)
	return appendClaims(dst, h.Claims) // one byte when empty: a field appended later follows it
}

func appendClaims(dst []byte, cs []RecoverClaim) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cs)))
	for _, c := range cs {
		dst = binary.AppendUvarint(dst, uint64(c.Partition))
		dst = binary.AppendUvarint(dst, c.Term)
		dst = binary.AppendUvarint(dst, c.Index)
		dst = appendStrings(dst, c.Survivors)
	}
	return dst
}

func decodeClaims(d *shard.Decoder) []RecoverClaim {
	n := d.Count(4)
	if n == 0 {
		return nil
	}
	out := make([]RecoverClaim, 0, n)
	for range n {
		out = append(out, RecoverClaim{Partition: decodePartition(d), Term: d.Uvarint(), Index: d.Uvarint(), Survivors: decodeStrings(d)})
	}
	return out
}

// appendPlacement appends the sender's replica count and placement, after
// the workers' ids (an older peer stops reading before them).
func appendPlacement(dst []byte, h *Heartbeat) []byte {
	dst = binary.AppendUvarint(dst, uint64(max(h.Replicas, 0)))
	return binary.AppendUvarint(dst, uint64(h.Placement))
}

// appendWorkerIDs appends each ad's worker ids, after all the ads (an
// older peer stops reading before them).
func appendWorkerIDs(dst []byte, ws []WorkerAd) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	for _, w := range ws {
		dst = appendStrings(dst, w.Workers)
	}
	return dst
}

func appendWorkerAds(dst []byte, ws []WorkerAd) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	for _, w := range ws {
		dst = shard.AppendString(dst, w.Handler)
		dst = appendStrings(dst, w.Labels)
		dst = binary.AppendUvarint(dst, uint64(max(w.Want, 0)))
	}
	return dst
}

func appendOutcome(dst []byte, o *OutcomeMsg) []byte {
	dst = shard.AppendString(dst, string(o.Task))
	dst = binary.AppendUvarint(dst, uint64(o.Round))
	dst = shard.AppendString(dst, o.Holder)
	var flags byte
	for i, b := range []bool{o.OK, o.Permanent, o.TimedOut, o.Lost, o.Died == shard.DiedWithOthers, o.Died == shard.DiedAlone} {
		if b {
			flags |= 1 << i
		}
	}
	dst = append(dst, flags)
	dst = shard.AppendBytes(dst, o.Result)
	return shard.AppendString(dst, o.Error)
}

func appendGrant(dst []byte, g *Grant) []byte {
	dst = shard.AppendString(dst, string(g.Task))
	dst = binary.AppendUvarint(dst, uint64(g.Round))
	dst = shard.AppendTime(dst, g.Expiry)
	dst = shard.AppendString(dst, g.Handler)
	dst = shard.AppendBytes(dst, g.Payload)
	dst = binary.AppendVarint(dst, int64(g.Timeout))
	// Appended: the inputs, sorted by name so that the encoding is
	// deterministic.
	dst = binary.AppendUvarint(dst, uint64(len(g.Inputs)))
	for _, name := range slices.Sorted(maps.Keys(g.Inputs)) {
		dst = shard.AppendString(dst, name)
		dst = shard.AppendBytes(dst, g.Inputs[name])
	}
	return dst
}

// DecodeMessage decodes a Message. It never panics and bounds every
// allocation by the input's size.
func DecodeMessage(p []byte) (Message, error) {
	var m Message
	if len(p) < 2 {
		return m, fmt.Errorf("%w: %d bytes", ErrWire, len(p))
	}
	if p[0] != WireVersion {
		return m, fmt.Errorf("%w: version %d, want %d", ErrWire, p[0], WireVersion)
	}
	m.Type = MsgType(p[1])
	if m.Type == 0 || m.Type >= numMsgTypes {
		return m, fmt.Errorf("%w: unknown type %d", ErrWire, p[1])
	}
	d := shard.NewDecoder(p[2:])
	m.From = d.String()
	switch m.Type {
	case MsgRaft:
		decodeRaft(&d, &m)
	case MsgHeartbeat:
		m.Heartbeat = decodeHeartbeat(&d)
	case MsgProbe:
		m.Probe = decodeProbe(&d)
	case MsgOutcome:
		n := d.Count(4)
		m.Outcomes = make([]OutcomeMsg, 0, n)
		for range n {
			m.Outcomes = append(m.Outcomes, decodeOutcome(&d))
		}
	case MsgAck:
		n := d.Count(2)
		m.Acks = make([]AckMsg, 0, n)
		for range n {
			m.Acks = append(m.Acks, AckMsg{Task: shard.TaskID(d.String()), Round: shard.Round(d.Uvarint())})
		}
	case MsgStealReq:
		m.Want = boundedInt(&d)
		m.Load = decodeLoad(&d)
		if d.Err() == nil && d.Len() > 0 { // appended: an older peer sends none
			m.Holder = d.String()
		}
	case MsgGrant:
		m.Load = decodeLoad(&d)
		refused := d.Byte()
		m.Refused, m.NotNow = refused != 0, refused == 2
		n := d.Count(6)
		m.Grants = make([]Grant, 0, n)
		for range n {
			m.Grants = append(m.Grants, decodeGrant(&d))
		}
		if d.Err() == nil && d.Len() > 0 {
			m.Holder = d.String()
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeAttempts(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeTraces(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeShards(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeRequires(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeWorkers(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeDeaths(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeGrantTasks(&d, m.Grants)
		}
		if d.Err() == nil && d.Len() > 0 {
			decodeRunInfos(&d, m.Grants)
		}
	case MsgReplicaAsk:
		n := d.Count(1)
		m.Asks = make([]uint32, 0, n)
		for range n {
			m.Asks = append(m.Asks, decodePartition(&d))
		}
	case MsgReplicaGone:
		n := d.Count(2)
		m.Gone = make([]GoneMsg, 0, n)
		for range n {
			m.Gone = append(m.Gone, GoneMsg{Partition: decodePartition(&d), Index: d.Uvarint()})
		}
	}
	if err := d.Err(); err != nil {
		return Message{}, fmt.Errorf("%w: %v %v", ErrWire, m.Type, err)
	}
	// A message may end with fields a newer peer appended (as a
	// heartbeat's labels and a grant's holder were): they are skipped, so
	// a mesh can be upgraded one peer at a time when the next version
	// extends a message. Every field this version knows was read and
	// checked above.
	return m, nil
}

func boundedInt(d *shard.Decoder) int {
	v := d.Uvarint()
	if v > maxWireList {
		d.Fail("value %d over %d", v, maxWireList)
		return 0
	}
	return int(v)
}

func decodeRaft(d *shard.Decoder, m *Message) {
	n := d.Count(2)
	m.Raft = make([]RaftMsg, 0, n)
	for range n {
		part := d.Uvarint()
		b := d.Bytes()
		if d.Err() != nil {
			return
		}
		if part > 1<<16 {
			d.Fail("partition %d out of range", part)
			return
		}
		if err := checkRaftFields(b); err != nil {
			d.Fail("raft message: %v", err)
			return
		}
		msg := &pb.Message{}
		if err := msg.Unmarshal(b); err != nil {
			d.Fail("raft message: %v", err)
			return
		}
		m.Raft = append(m.Raft, RaftMsg{Partition: uint32(part), Msg: msg})
	}
}

// raftResponsesField is the field number of raftpb.Message's Responses.
const raftResponsesField = 14

// checkRaftFields walks the top-level fields of an encoded Raft message
// and refuses one that carries Responses. Only a node's own storage
// messages have them (never one sent to a peer), and they are the one
// field of a message that holds messages: its decoder recurses once per
// level, without a limit, so a frame of nested Responses would take the
// decoding goroutine's stack past Go's limit, which no recover catches.
func checkRaftFields(b []byte) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad field tag")
		}
		b = b[n:]
		if tag>>3 == raftResponsesField {
			return errors.New("responses in a message from a peer")
		}
		switch tag & 7 {
		case 0: // varint
			_, n := binary.Uvarint(b)
			if n <= 0 {
				return errors.New("bad varint")
			}
			b = b[n:]
		case 1: // 64-bit
			if len(b) < 8 {
				return errors.New("truncated field")
			}
			b = b[8:]
		case 2: // length-delimited
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("truncated field")
			}
			b = b[n+int(l):]
		case 5: // 32-bit
			if len(b) < 4 {
				return errors.New("truncated field")
			}
			b = b[4:]
		default:
			return fmt.Errorf("wire type %d", tag&7)
		}
	}
	return nil
}

// decodePartition reads a partition number, at most 1<<16 as in decodeRaft
// (Step checks it against the mesh's partition count).
func decodePartition(d *shard.Decoder) uint32 {
	v := d.Uvarint()
	if v > 1<<16 {
		d.Fail("partition %d out of range", v)
		return 0
	}
	return uint32(v)
}

func decodeLoad(d *shard.Decoder) Load {
	return Load{Ready: boundedInt(d), Running: boundedInt(d), Slots: boundedInt(d)}
}

func decodeStrings(d *shard.Decoder) []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.String())
	}
	return out
}

func decodeHeartbeat(d *shard.Decoder) *Heartbeat {
	h := &Heartbeat{Boot: d.String(), Partitions: boundedInt(d), Load: decodeLoad(d)}
	h.Members = decodeStrings(d)
	h.Forgotten = decodeStrings(d)
	h.Addrs = decodeStrings(d)
	h.Draining = d.Byte() != 0
	if d.Len() == 0 {
		return h // a heartbeat from before labels
	}
	h.Labels = decodeStrings(d)
	for i, kv := range h.Labels {
		if err := shard.ValidateLabel(kv); err != nil {
			d.Fail("heartbeat label: %v", err)
			return h
		}
		if i > 0 && h.Labels[i-1] >= kv {
			d.Fail("heartbeat labels not sorted and unique")
			return h
		}
	}
	h.Stranded = boundedInt(d)
	if d.Len() == 0 {
		return h // a heartbeat from before StrandedFor
	}
	h.StrandedFor = decodeStrings(d)
	if d.Len() == 0 {
		return h // a heartbeat from before Features
	}
	h.Features = d.Uvarint()
	if d.Len() == 0 {
		return h // a heartbeat from before Workers
	}
	h.Workers = decodeWorkerAds(d)
	if d.Err() != nil || d.Len() == 0 {
		return h // a heartbeat from before the workers' ids
	}
	decodeWorkerIDs(d, h.Workers)
	if d.Err() != nil || d.Len() == 0 {
		return h // a heartbeat from before Replicas and Placement
	}
	// Any value decodes: a replica count or placement this release does
	// not know is another than the mesh's, which Step refuses.
	h.Replicas = boundedInt(d)
	h.Placement = ring.Placement(min(d.Uvarint(), math.MaxUint8))
	if d.Err() != nil || d.Len() == 0 {
		return h // a heartbeat from before Inc and Sync
	}
	h.Inc = d.Uvarint()
	if d.Len() > 0 {
		h.Sync = d.Byte()
	}
	if d.Err() == nil && d.Len() > 0 {
		h.Book = decodeBook(d)
	}
	if d.Err() == nil && d.Len() > 0 {
		h.Sum = d.Uvarint()
	}
	if d.Err() == nil && d.Len() > 0 {
		h.Version = d.String()
	}
	if d.Err() == nil && d.Len() > 0 {
		h.Recover = decodeStrings(d)
	}
	if d.Err() == nil && d.Len() > 0 {
		h.Claims = decodeClaims(d)
	}
	return h
}

// decodeWorkerIDs reads the ads' worker ids: one list per ad, each of
// non-empty ids, sorted and unique.
func decodeWorkerIDs(d *shard.Decoder, ws []WorkerAd) {
	if n := d.Count(1); d.Err() == nil && n != len(ws) {
		d.Fail("heartbeat worker ids for %d ads, want %d", n, len(ws))
		return
	}
	for i := range ws {
		ids := decodeStrings(d)
		for j, id := range ids {
			if id == "" || j > 0 && ids[j-1] >= id {
				d.Fail("heartbeat worker ids empty, not sorted or not unique")
				return
			}
		}
		ws[i].Workers = ids
	}
}

// decodeWorkerAds reads a heartbeat's Workers: non-empty handler names,
// valid labels, sorted and unique.
func decodeWorkerAds(d *shard.Decoder) []WorkerAd {
	n := d.Count(3)
	if n == 0 {
		return nil
	}
	out := make([]WorkerAd, 0, n)
	for range n {
		w := WorkerAd{Handler: d.String(), Labels: decodeStrings(d), Want: boundedInt(d)}
		if d.Err() != nil {
			return nil
		}
		if w.Handler == "" {
			d.Fail("heartbeat worker without a handler")
			return nil
		}
		for i, kv := range w.Labels {
			if err := shard.ValidateLabel(kv); err != nil {
				d.Fail("heartbeat worker label: %v", err)
				return nil
			}
			if i > 0 && w.Labels[i-1] >= kv {
				d.Fail("heartbeat worker labels not sorted and unique")
				return nil
			}
		}
		out = append(out, w)
	}
	return out
}

func decodeOutcome(d *shard.Decoder) OutcomeMsg {
	o := OutcomeMsg{Task: shard.TaskID(d.String()), Round: shard.Round(d.Uvarint()), Holder: d.String()}
	flags := d.Byte()
	o.OK, o.Permanent, o.TimedOut, o.Lost = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
	switch flags & 48 {
	case 16:
		o.Died = shard.DiedWithOthers
	case 32:
		o.Died = shard.DiedAlone
	case 48:
		d.Fail("outcome flags %#x: died both alone and with others", flags)
	}
	o.Result = d.Bytes()
	o.Error = d.String()
	return o
}

// decodeAttempts reads the grants' attempts, appended after the holder.
func decodeAttempts(d *shard.Decoder, grants []Grant) {
	if n := d.Count(1); n != len(grants) {
		d.Fail("%d attempts for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Attempt = boundedInt(d)
	}
}

// decodeRequires reads the grants' required labels, appended after their
// shards.
func decodeRequires(d *shard.Decoder, grants []Grant) {
	if n := d.Count(1); n != len(grants) {
		d.Fail("%d requires for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Require = decodeStrings(d)
		for _, kv := range grants[i].Require {
			if err := shard.ValidateLabel(kv); err != nil {
				d.Fail("grant require: %v", err)
				return
			}
		}
	}
}

// decodeDeaths reads the grants' deaths, appended after their
// workers.
func decodeDeaths(d *shard.Decoder, grants []Grant) {
	if n := d.Count(1); n != len(grants) {
		d.Fail("%d deaths for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Deaths = shard.DeathsOf(d.Byte())
	}
}

// decodeGrantTasks reads the grants' creation times, names and pins,
// appended after their deaths.
func decodeGrantTasks(d *shard.Decoder, grants []Grant) {
	if n := d.Count(3); n != len(grants) {
		d.Fail("%d creation times for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Created, grants[i].Name, grants[i].Pin = d.Time(), d.String(), d.String()
	}
}

// appendRunInfo appends a grant's RunInfo: priority (zigzag), attempts
// allowed, error, stage and item.
func appendRunInfo(dst []byte, ri *shard.RunInfo) []byte {
	dst = binary.AppendVarint(dst, int64(ri.Priority))
	dst = binary.AppendUvarint(dst, uint64(max(ri.MaxAttempts, 0)))
	dst = shard.AppendString(dst, ri.Error)
	dst = binary.AppendUvarint(dst, uint64(max(ri.Stage, 0)))
	return binary.AppendUvarint(dst, uint64(max(ri.Item, 0)))
}

// decodeRunInfos reads the grants' RunInfos, appended after their
// creation times, names and pins.
func decodeRunInfos(d *shard.Decoder, grants []Grant) {
	if n := d.Count(5); n != len(grants) {
		d.Fail("%d run infos for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		p := d.Varint()
		if p < math.MinInt32 || p > math.MaxInt32 {
			d.Fail("grant priority %d out of range", p)
			return
		}
		ri := &grants[i].Info
		ri.Priority = int32(p)
		ri.MaxAttempts = boundedInt(d)
		ri.Error = d.String()
		ri.Stage, ri.Item = boundedInt(d), boundedInt(d)
	}
}

// decodeWorkers reads the grants' pinned workers, appended after their
// requires.
func decodeWorkers(d *shard.Decoder, grants []Grant) {
	if n := d.Count(1); n != len(grants) {
		d.Fail("%d workers for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Worker = d.String()
	}
}

// decodeShards reads the grants' broadcast shards, appended after their
// traces.
func decodeShards(d *shard.Decoder, grants []Grant) {
	if n := d.Count(2); n != len(grants) {
		d.Fail("%d shards for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Shard, grants[i].Shards = boundedInt(d), boundedInt(d)
		if grants[i].Shards > 0 && grants[i].Shard >= grants[i].Shards {
			d.Fail("grant shard %d of %d", grants[i].Shard, grants[i].Shards)
			return
		}
	}
}

// decodeTraces reads the grants' traces, appended after their attempts.
func decodeTraces(d *shard.Decoder, grants []Grant) {
	if n := d.Count(1); n != len(grants) {
		d.Fail("%d traces for %d grants", n, len(grants))
		return
	}
	for i := range grants {
		grants[i].Trace = d.String()
	}
}

func decodeGrant(d *shard.Decoder) Grant {
	g := Grant{Task: shard.TaskID(d.String()), Round: shard.Round(d.Uvarint()), Expiry: d.Time()}
	g.Handler = d.String()
	g.Payload = d.Bytes()
	g.Timeout = time.Duration(d.Varint())
	n := d.Count(2) // a name and a result, two length prefixes at least
	if n == 0 {
		return g
	}
	g.Inputs = make(map[string]json.RawMessage, n)
	for range n {
		name, res := d.String(), d.Bytes()
		if d.Err() != nil {
			return g
		}
		if _, dup := g.Inputs[name]; dup {
			d.Fail("grant %s: input %q twice", g.Task, name)
			return g
		}
		g.Inputs[name] = res
	}
	return g
}
