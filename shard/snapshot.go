package shard

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// snapshotVersion 2 adds the schedules after the finished groups, 3 the
// audit trail after them, 4 the group and task spec extensions (codec
// version 2) and each group's webhook state after its tasks, and 5 each
// group's retry keys and its tasks' retry marks after the webhook state,
// 6 the tasks an external worker died running (Event.Died) after the
// audit trail; versions 1 to 5 are still read. A snapshot with no such
// task is written as version 5, which a peer that predates 6 reads. 7 adds
// the changed fields of the audit trail's schedule updates after the
// crashed tasks; it is written only while the trail holds such an entry
// (which only a mesh whose every replica applies EvScheduleUpdated has).
const snapshotVersion = 7

// Snapshot encodes the folded state (not the leader-local state) so that
// Restore on another replica, or after a restart, rebuilds exactly the same
// state. Groups are written in id order, so equal states give equal bytes.
// The buffer is sized from the last snapshot's length: a snapshot of
// megabytes grown by appends copied itself a dozen times.
func (s *Shard) Snapshot() []byte { return s.SnapshotGrown(0) }

// SnapshotGrown is Snapshot for a caller that knows how many bytes of
// entries were applied since the last one (grown): the state grew by
// about as much, and a buffer sized for the last snapshot alone was
// outgrown, and copied, at nearly every snapshot of a growing partition
// (8% of the simulator's CPU under w3).
func (s *Shard) SnapshotGrown(grown int) []byte {
	return s.AppendSnapshot(make([]byte, 0, s.snapSize+max(s.snapSize/8, grown)+64))
}

// AppendSnapshot appends Snapshot's encoding to dst: a caller that
// encodes many partitions in turn (a digest of each) reuses one buffer.
// dst is grown once to the last snapshot's length, where appends doubled
// a smaller buffer up to it, copying and zeroing fresh memory at each
// step (the simulator's digests of a 10,000-task partition, 2% of a w3
// run's CPU).
func (s *Shard) AppendSnapshot(dst []byte) []byte {
	if need := s.snapSize + s.snapSize/8 + 64; cap(dst)-len(dst) < need {
		dst = append(make([]byte, 0, len(dst)+need), dst...)
	}
	start := len(dst)
	dst = append(dst, 5)
	dst = binary.AppendUvarint(dst, s.seq)
	ids := sortedGroupIDs(s.groups)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = appendGroupState(dst, s.groups[id])
	}
	// The finished groups still held, in finish order (a removed group's
	// id may linger in done behind a later one; it is not state).
	live := make([]GroupID, 0, len(s.done)-s.doneHead)
	for _, id := range s.done[s.doneHead:] {
		if s.groups[id] != nil {
			live = append(live, id)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(live)))
	for _, id := range live {
		dst = AppendString(dst, string(id))
	}
	dst = s.appendSchedules(dst)
	dst = appendAudit(dst, s.audit)
	crashed := s.crashed(ids)
	fields := auditFields(s.audit)
	if len(crashed) > 0 || fields {
		dst[start] = 6
		dst = appendCrashed(dst, crashed)
	}
	if fields {
		dst[start] = 7
		dst = appendAuditFields(dst, s.audit)
	}
	s.snapSize = len(dst) - start
	return dst
}

func appendGroupState(dst []byte, g *group) []byte {
	var ts TaskSpec
	dst = appendGroupSpec(dst, &g.spec, len(g.tasks), func(i int) *TaskSpec {
		ts = g.tasks[i].spec()
		return &ts
	})
	dst = AppendTime(dst, g.created)
	dst = AppendTime(dst, g.finished)
	for _, t := range g.tasks {
		dst = append(dst, byte(t.state))
		dst = binary.AppendUvarint(dst, uint64(t.attempt))
		dst = binary.AppendUvarint(dst, uint64(t.round))
		dst = AppendString(dst, t.holder)
		dst = t.expiry.append(dst)
		dst = t.notBefore.append(dst)
		dst = AppendBytes(dst, t.result)
		dst = AppendString(dst, t.err)
		dst = t.started.append(dst)
		dst = t.finished.append(dst)
		dst = binary.AppendUvarint(dst, t.seq)
		dst = binary.AppendUvarint(dst, uint64(t.histLen()))
		for i := range t.histLen() {
			h := t.event(i)
			var note eventNote
			if h.note != nil {
				note = *h.note
			}
			dst = append(dst, byte(h.typ))
			dst = h.at.append(dst)
			dst = binary.AppendUvarint(dst, uint64(h.round))
			dst = AppendString(dst, h.holder)
			dst = AppendString(dst, note.err)
			dst = AppendString(dst, note.by)
		}
	}
	n := &g.notify
	dst = binary.AppendUvarint(dst, uint64(n.attempts))
	var flags byte
	if n.delivered {
		flags |= 1
	}
	if n.gaveUp {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = AppendString(dst, n.err)
	dst = AppendTime(dst, n.next)
	dst = binary.AppendUvarint(dst, uint64(len(g.retryKeys)))
	for _, k := range g.retryKeys {
		dst = AppendString(dst, k)
	}
	for _, t := range g.tasks {
		dst = binary.AppendUvarint(dst, uint64(t.retried))
	}
	return dst
}

// Restore replaces the state with a snapshot's. On error the state is
// unchanged. Leader-local state is reset: call SetLeader afterwards.
func (s *Shard) Restore(p []byte) error {
	r, err := DecodeSnapshot(p)
	if err != nil {
		return err
	}
	s.Install(r)
	return nil
}

// Restored is a snapshot decoded and checked by DecodeSnapshot, to be
// installed in a Shard once. A peer checks a snapshot it receives before
// its Raft sees it and installs it later: decoded once, not twice (a
// 10,000-task group's snapshot took a tenth of a simulated W3 run's CPU
// to decode a second time).
type Restored struct {
	groups map[GroupID]*group
	done   []GroupID
	seq    uint64
	scheds map[ScheduleID]*schedule
	audit  []AuditEntry
}

// DecodeSnapshot decodes a snapshot written by Snapshot, refusing one that
// Restore would refuse. Nothing in the result shares memory with p.
func DecodeSnapshot(p []byte) (*Restored, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("shard: restore: empty snapshot: %w", ErrCodec)
	}
	if p[0] < 1 || p[0] > snapshotVersion {
		return nil, fmt.Errorf("shard: restore: unknown snapshot version %d: %w", p[0], ErrCodec)
	}
	d := NewDecoder(p[1:])
	var sd stateDecoder
	r := &Restored{seq: d.Uvarint(), scheds: map[ScheduleID]*schedule{}}
	n := d.Count(8)
	r.groups = make(map[GroupID]*group, n)
	for range n {
		g, err := sd.group(&d, p[0])
		if err != nil {
			return nil, err
		}
		if r.groups[g.id] != nil {
			return nil, fmt.Errorf("shard: restore: group %s twice: %w", g.id, ErrCodec)
		}
		r.groups[g.id] = g
	}
	for range d.Count(1) {
		r.done = append(r.done, GroupID(d.String()))
	}
	if p[0] >= 2 && d.Err() == nil {
		var err error
		if r.scheds, err = decodeSchedules(&d); err != nil {
			return nil, err
		}
	}
	if p[0] >= 3 && d.Err() == nil {
		r.audit = decodeAudit(&d)
	}
	if p[0] >= 6 && d.Err() == nil {
		decodeCrashed(&d, r.groups)
	}
	if p[0] >= 7 && d.Err() == nil {
		decodeAuditFields(&d, r.audit)
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("shard: restore: %w", err)
	}
	if d.Len() != 0 {
		return nil, fmt.Errorf("shard: restore: %d trailing bytes: %w", d.Len(), ErrCodec)
	}
	return r, nil
}

// Install replaces the state with r's, as Restore does; r is spent (its
// state is the Shard's now) and a second Install of it panics.
func (s *Shard) Install(r *Restored) {
	if r.groups == nil {
		panic("shard: Install of a spent snapshot")
	}
	s.install(r.groups, r.done, r.seq)
	s.schedules = r.scheds
	s.audit = r.audit
	*r = Restored{}
}

// stateDecoder decodes a snapshot's groups with what their tasks share:
// their holders (a few peers' runs, interned, where each task's and each
// event's was a string of its own) and room to decode a history in (a
// finished task's usual history is plain and kept as none: decoded in
// scratch, it is never allocated).
type stateDecoder struct {
	holders holderSet
	scratch []taskEvent
}

// holder reads a holder, interned.
func (sd *stateDecoder) holder(d *Decoder) string {
	b := d.next()
	if h, ok := sd.holders[string(b)]; ok { // no copy of b to look up
		return h
	}
	return sd.holders.of(string(b))
}

func (sd *stateDecoder) group(d *Decoder, version byte) (*group, error) {
	spec, used, err := decodeGroupSpecAt(d.p, version < 4)
	if err != nil {
		return nil, fmt.Errorf("shard: restore: %w", err)
	}
	d.p = d.p[used:]
	if err := spec.ValidateStored(); err != nil {
		return nil, fmt.Errorf("shard: restore: group %s: %v: %w", spec.ID, err, ErrCodec)
	}
	g := &group{id: spec.ID, spec: headOf(&spec), state: GroupRunning}
	g.created = d.Time()
	g.finished = d.Time()
	newTasks(g, spec.Tasks, 0) // their histories are decoded at their length
	for _, t := range g.tasks {
		sd.task(d, t)
		if !t.state.Valid() {
			return nil, fmt.Errorf("shard: restore: task %s: bad state %d: %w", t.id(), t.state, ErrCodec)
		}
	}
	if version >= 4 {
		g.notify.attempts = d.uint31()
		flags := d.Byte()
		g.notify.delivered, g.notify.gaveUp = flags&1 != 0, flags&2 != 0
		g.notify.err = d.String()
		g.notify.next = d.Time()
	}
	if version >= 5 {
		decodeRetryState(d, g)
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("shard: restore: %w", err)
	}
	linkDeps(g)
	return g, nil
}

func (sd *stateDecoder) task(d *Decoder, t *task) {
	t.state = State(d.Byte())
	t.attempt = int32(d.uint31()) // Apply counts one by one: never near the bound
	t.round = Round(d.Uvarint())
	t.holder = sd.holder(d)
	t.expiry = stampOf(d.Time())
	t.notBefore = stampOf(d.Time())
	t.result = d.Bytes()
	t.err = d.String()
	t.started = stampOf(d.Time())
	t.finished = stampOf(d.Time())
	t.seq = d.Uvarint()
	n := d.Count(6)
	h := sd.scratch[:0]
	for range n {
		var e taskEvent
		e.typ, e.at, e.round, e.holder = EventType(d.Byte()), stampOf(d.Time()), Round(d.Uvarint()), sd.holder(d)
		e.note = noteOf(d.String(), d.String())
		h = append(h, e)
	}
	sd.scratch = h
	if n == 0 {
		t.makePlain()
		return
	}
	t.history = h
	if !t.makePlain() {
		t.history = slices.Clone(h) // its own, at its length
	}
}

// install replaces the state and rebuilds what derives from it: counters,
// unmet dependencies, group states, the ready queue.
func (s *Shard) install(groups map[GroupID]*group, done []GroupID, seq uint64) {
	s.groups = groups
	s.forgetLookup()
	s.done = done
	s.doneHead = 0
	s.removalsChanged()
	s.seq = seq
	if s.ready.n > 0 && s.ready.onReady != nil {
		s.ready.onReady(false) // the tasks pushed below set it again
	}
	s.ready = readySet{external: s.cfg.External, onReady: s.cfg.OnReady}
	s.changes = nil
	s.counts = [numStates]int{}
	for _, id := range sortedGroupIDs(groups) {
		g := groups[id]
		for _, t := range g.tasks {
			g.counts[t.state]++
			s.counts[t.state]++
			t.depsLeft = 0 // linkDeps counted every dep; count the unmet ones
			for _, dep := range t.deps() {
				if g.tasks[dep].state != Succeeded {
					t.depsLeft++
				}
			}
			if t.state == Ready {
				s.ready.Push(t)
			}
		}
		if g.counts[Succeeded]+g.counts[Failed]+g.counts[Canceled] == len(g.tasks) {
			g.state = groupOutcome(g)
		}
		if g.initGates(); g.gateLive != nil {
			for _, t := range g.tasks {
				g.gateLive[g.gate(t)] += inFlight(t.state)
				if t.state == Pending && t.depsLeft == 0 {
					g.held[g.gate(t)].push(int(t.idx))
				}
			}
		}
	}
	s.rebuildNotifyPending()
	s.indexRebuild()
	s.leader = false
	s.wheel, s.inflight, s.schedInflight = nil, nil, nil
	s.firedOK = ""
}

// Valid reports whether s is a real state (not StateUnknown).
func (s State) Valid() bool { return s > StateUnknown && s < numStates }

func decodeRetryState(d *Decoder, g *group) {
	n := d.Count(1)
	if n > maxRetryKeys {
		d.Fail("group %s: %d retry keys, over %d", g.id, n, maxRetryKeys)
		return
	}
	for range n {
		g.retryKeys = append(g.retryKeys, d.String())
	}
	for _, t := range g.tasks {
		t.retried = int32(d.uint31())
		if t.retried > t.attempt {
			d.Fail("task %s retried at attempt %d of %d", t.id(), t.retried, t.attempt)
		}
	}
}

// crashed returns the tasks of groups ids (in that order) that an
// external worker died running since their last outcome (task.crash).
func (s *Shard) crashed(ids []GroupID) []*task {
	var out []*task
	for _, id := range ids {
		for _, t := range s.groups[id].tasks {
			if t.crash != 0 {
				out = append(out, t)
			}
		}
	}
	return out
}

// appendCrashed appends the deaths of ts: n, then group, index and
// Deaths.Mark of each.
func appendCrashed(dst []byte, ts []*task) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ts)))
	for _, t := range ts {
		dst = AppendString(dst, string(t.g.id))
		dst = binary.AppendUvarint(dst, uint64(t.idx))
		dst = append(dst, t.crash)
	}
	return dst
}

// decodeCrashed reads appendCrashed's marks into the tasks of groups.
func decodeCrashed(d *Decoder, groups map[GroupID]*group) {
	for range d.Count(3) {
		id := GroupID(d.String())
		idx := d.Uvarint()
		crash := d.Byte()
		if !d.Field("crashed") {
			return
		}
		g := groups[id]
		switch {
		case g == nil:
			d.Fail("deaths of group %s, not in the snapshot", id)
		case idx >= uint64(len(g.tasks)):
			d.Fail("deaths of task %d of group %s of %d tasks", idx, id, len(g.tasks))
		case crash == 0:
			d.Fail("deaths of task %s: none", g.tasks[idx].id())
		default:
			g.tasks[idx].crash = crash
			continue
		}
		return
	}
}
