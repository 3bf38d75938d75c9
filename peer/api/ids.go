package api

import (
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// Ids in paths
//
// An id the mesh cannot have made is a 400 naming id on every route that
// takes one, never a 404 (a lookup, forwarded to a partition's owner, for
// an id no partition can hold). The mesh makes
//
//	group     g<hex>  (random)  k<hex>  (an idempotency key's)
//	          <schedule>~<unix seconds>[~<tag>]  (a schedule's firing)
//	task      <group>.<index>
//	schedule  s<hex>
//
// with 24 lowercase hex digits and tags of letters, digits, '-' and '_'.
// The kind letter and the alphabet are checked, not the count of digits:
// ids are opaque to clients, and a peer of an older release must still
// route the ids a newer one made during a rolling upgrade.

// validGroupID reports whether id can name a group (see above), in at
// most 512 bytes.
func validGroupID(id string) bool {
	if len(id) < 2 || len(id) > maxKeyLen {
		return false
	}
	switch id[0] {
	case 'g', 'k':
		return lowerHex(id[1:])
	case 's':
		sched, rest, ok := strings.Cut(id, "~")
		if !ok || !validScheduleID(sched) {
			return false
		}
		sec, tag, tagged := strings.Cut(rest, "~")
		sec = strings.TrimPrefix(sec, "-")
		if sec == "" || strings.Trim(sec, "0123456789") != "" {
			return false
		}
		return !tagged || validTag(tag)
	}
	return false
}

// validScheduleID reports whether id can name a schedule: s and hex.
func validScheduleID(id string) bool {
	return len(id) >= 2 && len(id) <= maxKeyLen && id[0] == 's' && lowerHex(id[1:])
}

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// validTag reports whether tag can be a manual firing's: letters, digits,
// '-' and '_' (the mesh makes k or n and 16 hex digits).
func validTag(tag string) bool {
	if tag == "" || len(tag) > shard.MaxTriggerTag {
		return false
	}
	for i := range len(tag) {
		switch c := tag[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// groupIDError is the 400 of a group id that cannot be one (validGroupID);
// a task id is told apart, its group named.
func groupIDError(id string) error {
	if g, _, ok := shard.TaskID(id).Split(); ok && validGroupID(string(g)) {
		return fieldErr("id", "%q is a task id, not a group id: its group is %s", id, g)
	}
	return fieldErr("id", "malformed group id %.100q; want g or k and hex digits (g and 24, as the mesh makes them), or a schedule's firing <schedule id>~<unix seconds>[~<tag>]", id)
}
