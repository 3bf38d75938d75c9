package wal

import (
	"slices"
)

// Join adds o's changes after b's, so that appending b is the same as
// appending b as it was and then o, in one atomic write. o's updates follow
// b's (a Log applies several updates of one partition in order); an outbox
// or meta key o writes replaces b's; a key o deletes is dropped from b's
// puts and deleted.
//
// b copies o's updates and records into its own slices, so the caller may
// reuse o's slices; it shares their hard states, entries and values, which
// a Ready never changes once made (Logs copy what they store).
//
// A runtime uses it to hold a batch that needs no sync (a commit index,
// deleted outbox records) and write it with the next one that does: the
// held batch is lost by a crash before then, exactly as an unsynced Append
// may be, and the log pays one write and one sync instead of two and two.
func (b *Batch) Join(o *Batch) {
	b.Updates = append(b.Updates, o.Updates...)
	for _, r := range o.OutboxPut {
		b.OutboxDel = slices.DeleteFunc(b.OutboxDel, func(k string) bool { return k == r.Key })
		b.OutboxPut = putRecord(b.OutboxPut, r)
	}
	for _, k := range o.OutboxDel {
		b.OutboxPut = slices.DeleteFunc(b.OutboxPut, func(r Record) bool { return r.Key == k })
		if !slices.Contains(b.OutboxDel, k) {
			b.OutboxDel = append(b.OutboxDel, k)
		}
	}
	for _, r := range o.MetaPut {
		b.MetaPut = putRecord(b.MetaPut, r)
	}
}

// Size is the number of changes in b: updates and records.
func (b *Batch) Size() int {
	return len(b.Updates) + len(b.OutboxPut) + len(b.OutboxDel) + len(b.MetaPut)
}

// Reset empties b, keeping its slices' storage.
func (b *Batch) Reset() {
	clear(b.Updates) // drop the pointers the updates hold
	b.Updates, b.OutboxPut, b.OutboxDel, b.MetaPut = b.Updates[:0], b.OutboxPut[:0], b.OutboxDel[:0], b.MetaPut[:0]
}

// putRecord replaces the record with r's key in rs, or appends r.
func putRecord(rs []Record, r Record) []Record {
	if i := slices.IndexFunc(rs, func(x Record) bool { return x.Key == r.Key }); i >= 0 {
		rs[i] = r
		return rs
	}
	return append(rs, r)
}
