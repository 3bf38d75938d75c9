package shard

import (
	"crypto/sha256"
	"fmt"
)

// ConflictError is a request that conflicts with the state: an idempotency
// key reused for a different request. Field names the JSON field at fault
// ("key"). HTTP 409 conflict.
type ConflictError struct {
	Field   string
	Message string
}

func (e *ConflictError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Fingerprint is a digest of what a submission asks for: the spec without
// the parts each request assigns anew (the group id, derived from the key,
// and the trace id) and, for a broadcast, without the copies' per-peer
// names and pins (a repeat may expand over other peers): its template.
// Two requests with the same fingerprint create the same group.
//
// It is computed from the stored spec when needed, never stored, so the
// log and snapshots carry nothing new.
func (g *GroupSpec) Fingerprint() [32]byte {
	c := *g
	c.ID, c.Trace = "", ""
	if c.Mode == ModeBroadcast && len(c.Tasks) > 0 {
		t := c.Tasks[0]
		toWorkers := BroadcastWorker(&t) != ""
		t.Name, t.Pin = "", ""
		if toWorkers {
			t.Name = "\x00workers" // to workers and to peers are two requests
		}
		c.Tasks = []TaskSpec{t}
	}
	return sha256.Sum256(AppendGroupSpec(nil, &c))
}

// CheckRepeat reports whether spec may be answered by the group already
// created with its id (its key): nil when there is no such group or when it
// was created by the same request, a *ConflictError naming "key" when the
// key was first used for a different request. Every replica decides alike:
// it compares fingerprints of specs that came through the log.
func (s *Shard) CheckRepeat(spec *GroupSpec) error {
	g := s.groups[spec.ID]
	if g == nil {
		return nil
	}
	if gs := g.groupSpec(); gs.Fingerprint() == spec.Fingerprint() {
		return nil
	}
	return &ConflictError{Field: "key", Message: fmt.Sprintf(
		"key %q was first used for a different request (group %s); send that request again, or use a new key",
		spec.Key, spec.ID)}
}
