package shard

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The binary codec of the core's event types. It is the payload format of
// the partitions' Raft entries, so it is part of the on-disk format: a
// layout change needs a new CodecVersion, and decoders keep reading the old
// ones.
//
// Primitives (codec_prim.go): uvarint and varint as in encoding/binary;
// str = uvarint length + bytes; time = varint Unix nanoseconds, 0 for the
// zero time (see AppendTime). Layout:
//
//	batch   = version:byte(2) origin:str req:uvarint n:uvarint event*n
//	event   = type:byte flags:byte [at:time] [group:str] task round:uvarint
//	          [holder:str] expiry:time notBefore:time result:str error:str
//	          by:str [spec:group] [sched] [key] [died:byte]
//	flags   = 1 permanent | 2 timedOut | 4 spec present | 8 taskIndex
//	        | 16 sameAt | 32 sameGroup | 64 sameHolder | 128 died
//	task    = index:uvarint   if taskIndex: the task id is group + "." + index
//	        | str             otherwise
//
// sched (see AppendScheduleSpec) follows on, and only on, a schedule_set
// event, and key:str (the request's idempotency key) on, and only on, a
// retried event, and died (Event.Died: 1 or 2) on an expired event with
// the died flag, and only there. A peer that predates an event type or a
// flag refuses the entry (DecodeBatch fails: "unknown event type",
// "unknown flags"); it never applies it half understood (a leader
// proposes neither to such a peer: node's Features). Entries written
// before either exist decode as they did.
//
// The brackets are fields present only when their flag is clear: with
// sameAt, sameGroup or sameHolder set, the field equals the previous event's
// in the batch (the zero value for the first event, or outside a batch).
//	group   = id:str mode:byte key:str trace:str n:uvarint taskSpec*n
//	          notify:str stages:(n:uvarint (name:str concurrency:uvarint)*n)
//	          [concurrency:uvarint]   if mode's high bit (modeExt) is set
//	taskSpec = name:str handler:str payload:str priority:varint
//	          timeout:varint retry.maxAttempts:varint retry.backoff:varint
//	          retry.maxBackoff:varint delay:varint
//	          deps:(n:uvarint str*n) stage:varint
//	          item:uvarint require:(n:uvarint str*n) pin:str
//
// Version 1 (still read) has neither the group's notify and stages nor the
// task's item, require and pin.
//
// Decoding returns empty byte strings and lists as nil, and times in UTC
// without monotonic reading; everything else round-trips exactly. Encoding
// checks the invariants that decoding enforces (a known event type and
// mode, Spec only on EvSubmitted) and panics on violation: such an event
// comes from a bug in the core, and writing it would put an entry into the
// Raft log that no replica can apply.

// CodecVersion is the first byte of an encoded Batch.
const CodecVersion = 2

// Batch is the payload of one Raft entry: events proposed together, plus who
// proposed them and for which request.
type Batch struct {
	Origin string  // peer that proposed (for answering the client)
	Req    uint64  // the origin's request id, 0 = none
	Events []Event // in the order they are applied
}

// Event flags.
const (
	flagPermanent = 1 << iota
	flagTimedOut
	flagSpec
	flagTaskIndex
	flagSameAt     // at is omitted: it equals the previous event's
	flagSameGroup  // group is omitted: it equals the previous event's
	flagSameHolder // holder is omitted: it equals the previous event's
	flagDied       // died follows: an expired lease's worker died (Event.Died)
	flagsKnown     = 1<<8 - 1
)

// Smallest encodings, for bounding decoded counts by the input left.
const (
	minEventSize    = 9  // type, flags and seven fields of one byte each
	minTaskSpecSize = 11 // eleven fields of one byte each
	minStringSize   = 1  // the length
)

// AppendBatch appends the encoding of b, starting with CodecVersion, to dst.
// It panics if an event is invalid (see AppendEvent).
func AppendBatch(dst []byte, b *Batch) []byte {
	dst = append(dst, CodecVersion)
	dst = AppendString(dst, b.Origin)
	dst = binary.AppendUvarint(dst, b.Req)
	dst = binary.AppendUvarint(dst, uint64(len(b.Events)))
	var prev *Event
	for i := range b.Events {
		dst = appendEvent(dst, &b.Events[i], prev)
		prev = &b.Events[i]
	}
	return dst
}

// DecodeBatch decodes a batch written by AppendBatch. All of p must be
// consumed. An unknown version is an error.
func DecodeBatch(p []byte) (Batch, error) { return DecodeBatchInto(p, nil) }

// DecodeBatchInto is DecodeBatch decoding the events into buf when it has
// the room (its contents are overwritten), so that a caller applying one
// entry after another reuses one slice.
func DecodeBatchInto(p []byte, buf []Event) (Batch, error) {
	b, _, err := decodeBatch(p, buf, nil, false)
	return b, err
}

// DecodeBatchReusing is DecodeBatchInto decoding the task specs of the
// batch's submitted groups into tasks as well, when it has the room (its
// contents are overwritten), and returning the slice they took, grown if
// it had not, for the next entry. The specs' Tasks share it: they are
// valid until it is decoded into again, so a caller reuses it only when
// nothing keeps a submitted spec's task list past the batch's apply. The
// shard does not (it copies a task's fields, never the list: a group's
// schedule, which it does keep, is decoded apart), nor does the node.
func DecodeBatchReusing(p []byte, buf []Event, tasks []TaskSpec) (Batch, []TaskSpec, error) {
	return decodeBatch(p, buf, tasks[:0], true)
}

func decodeBatch(p []byte, buf []Event, room []TaskSpec, reuse bool) (Batch, []TaskSpec, error) {
	d := NewDecoder(p)
	d.reuse, d.room = reuse, room
	var b Batch
	v := d.Byte()
	if d.err == nil && (v < 1 || v > CodecVersion) {
		d.Fail("unknown version %d (want 1 to %d)", v, CodecVersion)
	}
	d.v1 = v == 1
	d.Field("version")
	origin := d.next()
	d.Field("origin")
	b.Req = d.Uvarint()
	d.Field("req")
	n := d.Count(minEventSize)
	var t idText
	if d.Field("events") {
		t.Grow(len(origin) + n*idTextPerEvent)
		b.Origin = t.add(origin)
		b.Events = decodeEvents(&d, n, buf, &t)
	}
	if d.err == nil && d.Len() > 0 {
		d.Fail("%d trailing bytes", d.Len())
	}
	if d.err != nil {
		d.within("batch")
		return Batch{}, d.room, d.err
	}
	return b, d.room, nil
}

// idText holds the text of the ids a batch's events name (its origin,
// their groups, tasks and holders), each a piece of its string: one allocation a
// batch, where each event made one or two (a batch holds a few events,
// and a task's id is built from its group and index). Written bytes are
// never changed (strings.Builder), so an id is valid as soon as read; a
// kept id keeps its batch's others, a few bytes each.
type idText struct{ strings.Builder }

// idTextPerEvent is the room an idText starts with for each event: its
// ids take 24 bytes on average in the simulator's runs, and outgrowing
// the room costs an allocation.
const idTextPerEvent = 32

// add appends b and returns it as a piece of the text.
func (t *idText) add(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	from := t.Len()
	t.Write(b)
	return t.String()[from:]
}

// taskID appends and returns the id of task i of group g ("g.7"), which
// starts at the text's end when that is g already (the event's group,
// read last).
func (t *idText) taskID(g GroupID, i uint64) TaskID {
	s := t.String()
	from := len(s) - len(g)
	if from < 0 || s[from:] != string(g) {
		from = len(s)
		t.WriteString(string(g))
	}
	var num [20]byte
	t.WriteByte('.')
	t.Write(strconv.AppendUint(num[:0], i, 10))
	return TaskID(t.String()[from:])
}

// decodeEvents decodes n events, into buf when it has the room.
func decodeEvents(d *Decoder, n int, buf []Event, t *idText) []Event {
	if n == 0 {
		return nil
	}
	var evs []Event
	if cap(buf) >= n {
		evs = buf[:n]
		clear(evs) // decodeEvent sets only what the encoding holds
	} else {
		evs = make([]Event, n)
	}
	prev := &Event{}
	for i := range evs {
		decodeEvent(d, &evs[i], prev, t)
		if d.err != nil {
			d.withinIndex("events", i)
			return nil
		}
		prev = &evs[i]
	}
	return evs
}

// AppendEvent appends the encoding of e to dst. It carries no version: it is
// meant to be embedded in a versioned container such as a Batch. It panics
// if e.Type is not Valid, if e.Spec is set on an event other than
// EvSubmitted, or if e.Spec has an unknown Mode.
func AppendEvent(dst []byte, e *Event) []byte { return appendEvent(dst, e, nil) }

// appendEvent encodes e; prev is the event before it in the same batch, or
// nil. Fields equal to prev's are encoded as a flag bit.
func appendEvent(dst []byte, e, prev *Event) []byte {
	if !e.Type.Valid() {
		panic(fmt.Sprintf("shard: AppendEvent: invalid event type %d", uint8(e.Type)))
	}
	if e.Spec != nil && e.Type != EvSubmitted {
		panic(fmt.Sprintf("shard: AppendEvent: Spec set on a %v event", e.Type))
	}
	if e.Key != "" && e.Type != EvRetried {
		panic(fmt.Sprintf("shard: AppendEvent: Key set on a %v event", e.Type))
	}
	if (e.Sched != nil) != (e.Type == EvScheduleSet || e.Type == EvScheduleUpdated) {
		panic(fmt.Sprintf("shard: AppendEvent: Sched on a %v event must be set iff it is schedule_set or schedule_updated", e.Type))
	}
	if e.Died != 0 && (e.Type != EvExpired || e.Died > DiedAlone) {
		panic(fmt.Sprintf("shard: AppendEvent: Died %d on a %v event", e.Died, e.Type))
	}
	index, isIndex := taskIndexOf(e.Group, e.Task)
	at := timeCode(e.At)
	flags := eventFlags(e, prev, at, isIndex)
	dst = append(dst, byte(e.Type), flags)
	if flags&flagSameAt == 0 {
		dst = binary.AppendVarint(dst, at)
	}
	if flags&flagSameGroup == 0 {
		dst = AppendString(dst, string(e.Group))
	}
	if isIndex {
		dst = binary.AppendUvarint(dst, index)
	} else {
		dst = AppendString(dst, string(e.Task))
	}
	dst = binary.AppendUvarint(dst, uint64(e.Round))
	if flags&flagSameHolder == 0 {
		dst = AppendString(dst, e.Holder)
	}
	dst = AppendTime(dst, e.Expiry)
	dst = AppendTime(dst, e.NotBefore)
	dst = AppendBytes(dst, e.Result)
	dst = AppendString(dst, e.Error)
	dst = AppendString(dst, e.By)
	if e.Spec != nil {
		dst = AppendGroupSpec(dst, e.Spec)
	}
	if e.Sched != nil {
		dst = AppendScheduleSpec(dst, e.Sched)
	}
	if e.Type == EvRetried {
		dst = AppendString(dst, e.Key)
	}
	if e.Died != 0 {
		dst = append(dst, byte(e.Died))
	}
	return dst
}

// eventFlags returns the flags byte of e; at is e.At's time code.
func eventFlags(e, prev *Event, at int64, isIndex bool) byte {
	var f byte
	if e.Permanent {
		f |= flagPermanent
	}
	if e.TimedOut {
		f |= flagTimedOut
	}
	if e.Spec != nil {
		f |= flagSpec
	}
	if isIndex {
		f |= flagTaskIndex
	}
	if e.Died != 0 {
		f |= flagDied
	}
	if prev == nil {
		return f
	}
	if at == timeCode(prev.At) {
		f |= flagSameAt
	}
	if e.Group == prev.Group {
		f |= flagSameGroup
	}
	if e.Holder == prev.Holder {
		f |= flagSameHolder
	}
	return f
}

// taskIndexOf returns i when t is exactly TaskIDOf(g, i), so that the task
// can be encoded as its index (the group is already in the event).
func taskIndexOf(g GroupID, t TaskID) (uint64, bool) {
	if len(t) <= len(g)+1 || string(t[:len(g)]) != string(g) || t[len(g)] != '.' {
		return 0, false
	}
	digits := t[len(g)+1:]
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false // not canonical: "g.07" must stay "g.07"
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		c := uint64(digits[i]) - '0'
		if c > 9 || v > (math.MaxUint64-c)/10 {
			return 0, false
		}
		v = v*10 + c
	}
	return v, true
}

// DecodeEvent decodes an event written by AppendEvent at the start of p and
// returns it with the number of bytes it took.
func DecodeEvent(p []byte) (Event, int, error) {
	d := NewDecoder(p)
	var e Event
	var t idText
	t.Grow(idTextPerEvent)
	decodeEvent(&d, &e, &Event{}, &t)
	if d.err != nil {
		d.within("event")
		return Event{}, 0, d.err
	}
	return e, len(p) - d.Len(), nil
}

// decodeEvent decodes into e. prev is the event before it in the same
// batch (or a zero Event): strings equal to prev's are shared, not copied.
// Its group and task are pieces of t, the batch's id text.
func decodeEvent(d *Decoder, e *Event, prev *Event, t *idText) {
	if e.Type = EventType(d.Byte()); d.err == nil && !e.Type.Valid() {
		d.Fail("unknown event type %d", uint8(e.Type))
	}
	flags := d.Byte()
	switch {
	case !d.Field("type"):
		return
	case flags&^flagsKnown != 0:
		d.Fail("unknown flags %#x", flags)
	case flags&flagSpec != 0 && e.Type != EvSubmitted:
		d.Fail("spec present on a %v event", e.Type)
	case flags&flagDied != 0 && e.Type != EvExpired:
		d.Fail("died on a %v event", e.Type)
	}
	if !d.Field("flags") {
		return
	}
	e.Permanent = flags&flagPermanent != 0
	e.TimedOut = flags&flagTimedOut != 0
	if e.At = prev.At; flags&flagSameAt == 0 {
		e.At = d.Time()
		d.Field("at")
	}
	if e.Group = prev.Group; flags&flagSameGroup == 0 {
		if b := d.next(); string(b) != string(prev.Group) {
			e.Group = GroupID(t.add(b))
		}
		d.Field("group")
	}
	if flags&flagTaskIndex == 0 {
		e.Task = TaskID(t.add(d.next()))
	} else if i := d.Uvarint(); d.err == nil {
		e.Task = t.taskID(e.Group, i)
	}
	d.Field("task")
	e.Round = Round(d.Uvarint())
	d.Field("round")
	if e.Holder = prev.Holder; flags&flagSameHolder == 0 {
		if b := d.next(); string(b) != prev.Holder {
			e.Holder = t.add(b)
		}
		d.Field("holder")
	}
	e.Expiry = d.Time()
	d.Field("expiry")
	e.NotBefore = d.Time()
	d.Field("not_before")
	e.Result = d.Bytes()
	d.Field("result")
	e.Error = d.StringReuse(prev.Error)
	d.Field("error")
	e.By = d.StringReuse(prev.By)
	if d.Field("by") && flags&flagSpec != 0 {
		e.Spec = new(GroupSpec)
		decodeGroupSpecIn(d, e.Spec, d.reuse)
		d.within("spec")
	}
	if d.err == nil && (e.Type == EvScheduleSet || e.Type == EvScheduleUpdated) {
		e.Sched = new(ScheduleSpec)
		decodeScheduleSpec(d, e.Sched)
		d.within("sched")
	}
	if d.err == nil && e.Type == EvRetried {
		e.Key = d.String()
		d.Field("key")
	}
	if d.err == nil && flags&flagDied != 0 {
		if e.Died = Death(d.Byte()); d.Field("died") && (e.Died == 0 || e.Died > DiedAlone) {
			d.Fail("died %d: want 1 or 2", e.Died)
		}
	}
}

// AppendGroupSpec appends the encoding of g to dst. Like AppendEvent it
// carries no version. It panics if g.Mode is not a known Mode: validate a
// spec (GroupSpec.Validate) before encoding it.
func AppendGroupSpec(dst []byte, g *GroupSpec) []byte {
	h := headOf(g)
	return appendGroupSpec(dst, &h, len(g.Tasks), func(i int) *TaskSpec { return &g.Tasks[i] })
}

// appendGroupSpec is AppendGroupSpec of the spec made of g and n tasks,
// task(i) the i-th (a group's spec is not kept whole: specs.go).
func appendGroupSpec(dst []byte, g *groupHead, n int, task func(i int) *TaskSpec) []byte {
	if !g.Mode.Known() {
		panic(fmt.Sprintf("shard: AppendGroupSpec: unknown mode %d", uint8(g.Mode)))
	}
	dst = AppendString(dst, string(g.ID))
	mode := byte(g.Mode)
	if g.Concurrency > 0 {
		mode |= modeExt
	}
	dst = append(dst, mode)
	dst = AppendString(dst, g.Key)
	dst = AppendString(dst, g.Trace)
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range n {
		dst = appendTaskSpec(dst, task(i))
	}
	dst = AppendString(dst, g.Notify)
	dst = binary.AppendUvarint(dst, uint64(len(g.Stages)))
	for _, st := range g.Stages {
		dst = AppendString(dst, st.Name)
		dst = binary.AppendUvarint(dst, uint64(st.Concurrency))
	}
	if g.Concurrency > 0 {
		dst = binary.AppendUvarint(dst, uint64(g.Concurrency))
	}
	return dst
}

// modeExt, the mode byte's high bit, says that the group's concurrency
// follows its stages. A group without one is encoded as before it existed,
// and a peer that predates it refuses the group as of an unknown mode
// (node's FeatureGroupConcurrency keeps such a group from its replicas).
const modeExt = 0x80

func appendTaskSpec(dst []byte, t *TaskSpec) []byte {
	dst = AppendString(dst, t.Name)
	dst = AppendString(dst, t.Handler)
	dst = AppendBytes(dst, t.Payload)
	dst = binary.AppendVarint(dst, int64(t.Priority))
	dst = binary.AppendVarint(dst, int64(t.Timeout))
	dst = binary.AppendVarint(dst, int64(t.Retry.MaxAttempts))
	dst = binary.AppendVarint(dst, int64(t.Retry.Backoff))
	dst = binary.AppendVarint(dst, int64(t.Retry.MaxBackoff))
	dst = binary.AppendVarint(dst, int64(t.Delay))
	dst = binary.AppendUvarint(dst, uint64(len(t.Deps)))
	for _, dep := range t.Deps {
		dst = AppendString(dst, dep)
	}
	dst = binary.AppendVarint(dst, int64(t.Stage))
	dst = binary.AppendUvarint(dst, uint64(t.Item))
	dst = binary.AppendUvarint(dst, uint64(len(t.Require)))
	for _, kv := range t.Require {
		dst = AppendString(dst, kv)
	}
	return AppendString(dst, t.Pin)
}

// DecodeGroupSpec decodes a group written by AppendGroupSpec at the start of
// p and returns it with the number of bytes it took.
func DecodeGroupSpec(p []byte) (GroupSpec, int, error) {
	return decodeGroupSpecAt(p, false)
}

// decodeGroupSpecAt is DecodeGroupSpec for data of the first layout when v1.
func decodeGroupSpecAt(p []byte, v1 bool) (GroupSpec, int, error) {
	d := NewDecoder(p)
	d.v1 = v1
	var g GroupSpec
	decodeGroupSpec(&d, &g)
	if d.err != nil {
		d.within("group")
		return GroupSpec{}, 0, d.err
	}
	return g, len(p) - d.Len(), nil
}

func decodeGroupSpec(d *Decoder, g *GroupSpec) { decodeGroupSpecIn(d, g, false) }

// decodeGroupSpecIn is decodeGroupSpec taking the task list from the
// decoder's room when reuse is set (see DecodeBatchReusing).
func decodeGroupSpecIn(d *Decoder, g *GroupSpec, reuse bool) {
	g.ID = GroupID(d.String())
	d.Field("id")
	mode := d.Byte()
	ext := mode&modeExt != 0
	if g.Mode = Mode(mode &^ modeExt); d.err == nil && (!g.Mode.Known() || ext && d.v1) {
		d.Fail("unknown mode %d", mode)
	}
	d.Field("mode")
	g.Key = d.String()
	d.Field("key")
	g.Trace = d.String()
	d.Field("trace")
	n := d.Count(minTaskSpecSize)
	if !d.Field("tasks") {
		return
	}
	if n > 0 {
		g.Tasks = d.taskRoom(n, reuse)
	}
	prev := &TaskSpec{}
	for i := range g.Tasks {
		decodeTaskSpec(d, &g.Tasks[i], prev)
		if d.err != nil {
			ownPayloads(g.Tasks[:i+1])
			d.withinIndex("tasks", i)
			return
		}
		prev = &g.Tasks[i]
	}
	ownPayloads(g.Tasks)
	if d.v1 {
		return
	}
	g.Notify = d.String()
	d.Field("notify")
	ns := d.Count(2)
	if !d.Field("stages") {
		return
	}
	if ns > 0 {
		g.Stages = make([]StageSpec, ns)
	}
	for i := range g.Stages {
		g.Stages[i].Name = d.String()
		g.Stages[i].Concurrency = d.uint31()
		if d.err != nil {
			d.withinIndex("stages", i)
			return
		}
	}
	if ext {
		if g.Concurrency = d.uint31(); d.err == nil && g.Concurrency == 0 {
			d.Fail("concurrency 0 flagged present")
		}
		d.Field("concurrency")
	}
}

// ownPayloads copies the payloads of ts, read in place, into one
// allocation: a group's tasks keep them, and are removed together. Each
// is capped at its length, so that an append moves it out.
func ownPayloads(ts []TaskSpec) {
	size := 0
	for i := range ts {
		size += len(ts[i].Payload)
	}
	if size == 0 {
		return
	}
	all := make([]byte, 0, size)
	for i := range ts {
		if p := ts[i].Payload; len(p) > 0 {
			all = append(all, p...)
			ts[i].Payload = all[len(all)-len(p) : len(all) : len(all)]
		}
	}
}

// decodeTaskSpec decodes into t, with its payload read in place: the
// caller copies it out (ownPayloads).
func decodeTaskSpec(d *Decoder, t *TaskSpec, prev *TaskSpec) {
	t.Name = d.String()
	d.Field("name")
	t.Handler = d.StringReuse(prev.Handler)
	d.Field("handler")
	if t.Payload = d.next(); len(t.Payload) == 0 {
		t.Payload = nil // as Bytes
	}
	d.Field("payload")
	t.Priority = d.int32()
	d.Field("priority")
	t.Timeout = time.Duration(d.Varint())
	d.Field("timeout")
	t.Retry.MaxAttempts = d.Int()
	d.Field("retry.max_attempts")
	t.Retry.Backoff = time.Duration(d.Varint())
	d.Field("retry.backoff")
	t.Retry.MaxBackoff = time.Duration(d.Varint())
	d.Field("retry.max_backoff")
	t.Delay = time.Duration(d.Varint())
	d.Field("delay")
	t.Deps = decodeStrings(d, "deps")
	t.Stage = d.Int()
	d.Field("stage")
	if d.v1 {
		return
	}
	t.Item = d.uint31()
	d.Field("item")
	t.Require = decodeStrings(d, "require")
	t.Pin = d.StringReuse(prev.Pin)
	d.Field("pin")
}

// taskRoom returns n zeroed task specs: with reuse, the next n of the
// room's capacity when it has them, else a new slice that becomes the room
// (so that the caller keeps the larger for the next batch; the groups
// decoded before keep theirs).
func (d *Decoder) taskRoom(n int, reuse bool) []TaskSpec {
	if !reuse {
		return make([]TaskSpec, n)
	}
	r := d.room
	if cap(r)-len(r) < n {
		r = make([]TaskSpec, 0, max(n, 2*cap(r)))
	}
	ts := r[len(r) : len(r)+n : len(r)+n]
	clear(ts)
	d.room = r[:len(r)+n]
	return ts
}

// decodeStrings decodes a list of strings; name is the list's field name.
func decodeStrings(d *Decoder, name string) []string {
	n := d.Count(minStringSize)
	if !d.Field(name) || n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.String()
		if d.err != nil {
			d.withinIndex(name, i)
			return nil
		}
	}
	return out
}
