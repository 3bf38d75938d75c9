package api

import "github.com/needle-mesh/needle/shard"

// validGroupID reports whether id can name a group: 1 to 512 bytes of
// ASCII letters, digits, '~', '-' and '_'. Every group id the mesh makes
// is of them (a submission's "g" or "k" and 24 hex digits, a schedule's
// firing "<schedule id>~<unix second>[~<tag>]"), and so is every id a
// test's backend makes up; any other id, a task's ("<group>.<n>") among
// them, can never name a group: a 400 naming id, not a 404.
func validGroupID(id string) bool {
	if id == "" || len(id) > maxKeyLen {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '~', c == '-', c == '_':
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
	return fieldErr("id", "malformed group id %.100q; want 1 to %d letters, digits, '~', '-' or '_' (g and 24 hex digits, as the mesh makes them)", id, maxKeyLen)
}
