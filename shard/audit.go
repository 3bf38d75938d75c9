package shard

import (
	"encoding/binary"
	"strings"
	"time"
)

// AuditEntry records an operator's action on the state: who canceled a task
// or group, or paused, resumed or deleted a schedule (a schedule's creation
// is recorded when the event names who asked). It is folded from
// the committed events like everything else, so every replica holds the same
// trail, and snapshots carry it.
type AuditEntry struct {
	At      time.Time
	Type    EventType // EvCanceled, EvRetried, EvScheduleSet, EvSchedulePaused, EvScheduleResumed, EvScheduleDeleted, EvScheduleTriggered, EvScheduleUpdated, EvPeerDrained, EvPeerForgotten
	Subject string    // task, group, schedule or peer id
	By      string    // who asked: the API token's name or the client address
	// Fields names what an EvScheduleUpdated changed, comma-separated in
	// the API's names ("cron,timezone"); "" for other actions.
	Fields string
}

// maxAudit bounds the audit entries kept per partition (oldest dropped).
const maxAudit = 1000

// audited reports whether an event type is an operator action.
func audited(t EventType) bool {
	switch t {
	case EvCanceled, EvRetried, EvScheduleSet, EvSchedulePaused, EvScheduleResumed, EvScheduleDeleted, EvScheduleTriggered, EvScheduleUpdated,
		EvPeerDrained, EvPeerForgotten:
		return true
	}
	return false
}

// Audited reports whether events of type t go into the audit trail
// (GET /v1/audit's actions).
func (t EventType) Audited() bool { return audited(t) }

// recordAudit appends e to the trail if it is an operator action. Called
// for every event before it is applied (an action on something already gone
// is still recorded: someone asked).
func (s *Shard) recordAudit(e *Event) {
	if !audited(e.Type) || e.By == "" {
		return
	}
	subject := string(e.Group)
	if e.Task != "" {
		subject = string(e.Task)
	}
	if len(s.audit) >= maxAudit {
		s.audit = append(s.audit[:0], s.audit[len(s.audit)-maxAudit+1:]...)
	}
	a := AuditEntry{At: e.At, Type: e.Type, Subject: subject, By: e.By}
	if e.Type == EvScheduleUpdated && e.Sched != nil && e.Sched.ValidateStored() == nil {
		// The fields it changes, when it takes effect (not fenced).
		if sc := s.schedules[ScheduleID(e.Group)]; sc != nil && (e.Round == 0 || uint64(e.Round) == ScheduleRevision(&sc.spec)) {
			a.Fields = strings.Join(ChangedFields(&sc.spec, e.Sched), ",")
		}
	}
	s.audit = append(s.audit, a)
}

// auditFields reports whether an entry of audit has Fields (the snapshot
// then needs version 7).
func auditFields(audit []AuditEntry) bool {
	for _, a := range audit {
		if a.Fields != "" {
			return true
		}
	}
	return false
}

// appendAuditFields appends the Fields of the audit entries that have
// them (snapshot version 7): their count, then each one's index and
// Fields.
func appendAuditFields(dst []byte, audit []AuditEntry) []byte {
	n := 0
	for _, a := range audit {
		if a.Fields != "" {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for i, a := range audit {
		if a.Fields != "" {
			dst = binary.AppendUvarint(dst, uint64(i))
			dst = AppendString(dst, a.Fields)
		}
	}
	return dst
}

// decodeAuditFields reads appendAuditFields into audit.
func decodeAuditFields(d *Decoder, audit []AuditEntry) {
	for range d.Count(2) {
		i := d.Uvarint()
		f := d.String()
		if !d.Field("audit fields") {
			return
		}
		switch {
		case i >= uint64(len(audit)):
			d.Fail("fields of audit entry %d of %d", i, len(audit))
		case audit[i].Type != EvScheduleUpdated || f == "":
			d.Fail("fields of a %v audit entry", audit[i].Type)
		default:
			audit[i].Fields = f
			continue
		}
		return
	}
}

// Audit returns the audit trail, oldest first.
func (s *Shard) Audit() []AuditEntry {
	out := make([]AuditEntry, len(s.audit))
	copy(out, s.audit)
	return out
}

func appendAudit(dst []byte, audit []AuditEntry) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(audit)))
	for _, a := range audit {
		dst = AppendTime(dst, a.At)
		dst = append(dst, byte(a.Type))
		dst = AppendString(dst, a.Subject)
		dst = AppendString(dst, a.By)
	}
	return dst
}

func decodeAudit(d *Decoder) []AuditEntry {
	n := d.Count(4)
	if n == 0 {
		return nil
	}
	out := make([]AuditEntry, 0, n)
	for range n {
		a := AuditEntry{At: d.Time(), Type: EventType(d.Byte()), Subject: d.String(), By: d.String()}
		if !audited(a.Type) {
			d.Fail("audit entry type %d", a.Type)
			return nil
		}
		out = append(out, a)
	}
	return out
}
