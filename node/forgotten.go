package node

import (
	"bytes"
	"maps"
	"slices"

	"github.com/needle-mesh/needle/wal"
)

// A forgotten peer is never re-admitted (needle forget, or ForgetAfter of
// silence), and the peers that have not forgotten it yet learn it from the
// Forgotten list every heartbeat carries. A forget held only in memory
// was lost with a restart: a peer told to forget, and restarted before
// its heartbeats spread it (the simulator: seed 320006, --peers 4 --kill
// 40s --workers 1, where the two others were paused and down when the
// forget came), learned the peer again from the others' membership lists,
// and it stayed in every ring, its partitions' replica sets unrepaired,
// until ForgetAfter; a second failure in the meantime took the majority
// of the partitions both held. The set is kept in the WAL's meta space.

// ForgottenMetaKey is the WAL meta record of the peers this node forgot
// (NodeConfig.Forgotten): their ids, sorted, one per line.
const ForgottenMetaKey = "forgotten"

// encodeForgotten encodes a set of forgotten peer ids.
func encodeForgotten(ids map[string]bool) []byte {
	var b []byte
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		b = append(append(b, id...), '\n')
	}
	return b
}

// decodeForgotten decodes encodeForgotten's record; empty lines, and an
// id that is not valid (NodeConfig.ValidID) or is self, are skipped.
func decodeForgotten(b []byte, self string, valid func(string) bool) []string {
	var out []string
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		id := string(line)
		if id == "" || id == self || valid != nil && !valid(id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// flushForgotten puts the record of forgotten peers in the Ready being
// built when the set changed since the last one, synced: an operator's
// forget is not taken back by a power loss.
func (n *Node) flushForgotten() {
	if !n.mesh.forgotNew {
		return
	}
	n.mesh.forgotNew = false
	n.rd.MustSync = true
	n.putMeta(ForgottenMetaKey, encodeForgotten(n.mesh.forgotten))
}

// putMeta puts the meta record key = v in the Ready being built, in place
// of one put there already.
func (n *Node) putMeta(key string, v []byte) {
	b := &n.rd.Persist
	b.MetaPut = slices.DeleteFunc(b.MetaPut, func(r wal.Record) bool { return r.Key == key })
	b.MetaPut = append(b.MetaPut, wal.Record{Key: key, Value: v})
}
