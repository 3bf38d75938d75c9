package shard

import (
	"encoding/binary"
	"time"
)

// AuditEntry records an operator's action on the state: who canceled a task
// or group, or paused, resumed or deleted a schedule (a schedule's creation
// is recorded when the event names who asked). It is folded from
// the committed events like everything else, so every replica holds the same
// trail, and snapshots carry it.
type AuditEntry struct {
	At      time.Time
	Type    EventType // EvCanceled, EvRetried, EvScheduleSet, EvSchedulePaused, EvScheduleResumed, EvScheduleDeleted, EvScheduleTriggered
	Subject string    // task, group or schedule id
	By      string    // who asked: the API token's name or the client address
}

// maxAudit bounds the audit entries kept per partition (oldest dropped).
const maxAudit = 1000

// audited reports whether an event type is an operator action.
func audited(t EventType) bool {
	switch t {
	case EvCanceled, EvRetried, EvScheduleSet, EvSchedulePaused, EvScheduleResumed, EvScheduleDeleted, EvScheduleTriggered:
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
	s.audit = append(s.audit, AuditEntry{At: e.At, Type: e.Type, Subject: subject, By: e.By})
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
