package badgerwal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// openLog opens a Log in dir, closed at the test's end (a second Close
// is a no-op).
func openLog(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	b, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// dump renders everything a Log stores, to compare two Logs.
func dump(t *testing.T, b *Log) string {
	t.Helper()
	var sb strings.Builder
	parts, err := b.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		st, err := b.Load(p)
		if err != nil {
			t.Fatalf("Load(%d): %v", p, err)
		}
		fmt.Fprintf(&sb, "partition %d hs=%s snap=%s\n", p, textOf(&st.HardState), textOf(&st.Snapshot))
		for _, e := range st.Entries {
			fmt.Fprintf(&sb, "  %s\n", textOf(&e))
		}
	}
	ob, err := b.Outbox()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ob {
		fmt.Fprintf(&sb, "outbox %q=%q\n", r.Key, r.Value)
	}
	for _, k := range []string{"m1", "m2", "m3"} {
		v, ok, err := b.Meta(k)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "meta %s=%q %v\n", k, v, ok)
	}
	return sb.String()
}

func textOf(m message) string {
	b, err := m.Marshal()
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	return fmt.Sprintf("%x", b)
}

// journalBatches are three Appends: entries of two partitions, hard
// states, outbox records put and deleted, meta records put and replaced.
func journalBatches() []*wal.Batch {
	hs := func(commit uint64) raftpb.HardState {
		return raftpb.HardState{Term: uint64(2), Commit: commit}
	}
	big := ents(7, 7, 2)
	big[0].Data = bytes.Repeat([]byte("b"), 2*chunkSize+100) // three chunks
	return []*wal.Batch{
		{Updates: []wal.Update{{Partition: 1, HardState: hs(3), Entries: ents(1, 5, 2)}},
			OutboxPut: []wal.Record{{Key: "o1", Value: []byte("first")}},
			MetaPut:   []wal.Record{{Key: "m1", Value: []byte("one")}}},
		{Updates: []wal.Update{{Partition: 1, HardState: hs(6), Entries: append(ents(6, 6, 2), big...)},
			{Partition: 2, HardState: hs(2), Entries: ents(1, 3, 2)}},
			OutboxDel: []string{"o1"},
			OutboxPut: []wal.Record{{Key: "o2", Value: []byte("second")}},
			MetaPut:   []wal.Record{{Key: "m1", Value: []byte("uno")}, {Key: "m2", Value: []byte("two")}}},
		{Updates: []wal.Update{{Partition: 2, HardState: hs(4), Entries: ents(4, 9, 2)}},
			OutboxDel: []string{"o2"},
			MetaPut:   []wal.Record{{Key: "m3", Value: []byte("three")}}},
	}
}

func appendSync(t *testing.T, b *Log, batch *wal.Batch) {
	t.Helper()
	if err := b.Append(batch); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// startOver checkpoints b and begins a new journal cycle, as a full
// journal does.
func startOver(t *testing.T, b *Log) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := b.j.restart(); err != nil {
		t.Fatal(err)
	}
}

// checkpointed opens a Log in a new dir, syncs the first of
// journalBatches, checkpoints, copies Badger's files as they stand then
// (atCheckpoint, without the journal) and syncs the second.
func checkpointed(t *testing.T) (b *Log, dir, atCheckpoint string) {
	t.Helper()
	dir = t.TempDir()
	b = openLog(t, dir, Options{})
	batches := journalBatches()
	appendSync(t, b, batches[0])
	startOver(t, b)
	atCheckpoint = copyDir(t, dir, journalName)
	appendSync(t, b, batches[1])
	return b, dir, atCheckpoint
}

// copyDir copies the files of dir (no subdirectories) into a new
// directory; skip names a file to leave out.
func copyDir(t *testing.T, dir, skip string) string {
	t.Helper()
	to := t.TempDir()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if de.IsDir() || de.Name() == skip {
			continue
		}
		copyFile(t, filepath.Join(dir, de.Name()), filepath.Join(to, de.Name()))
	}
	return to
}

// copyFile copies a file, leaving its blocks of zeros as holes: Badger's
// files are sparse, hundreds of MiB of which a few are written.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := src.ReadAt(buf, off)
		if b := buf[:n]; bytes.Count(b, []byte{0}) != n {
			if _, err := dst.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Truncate(off); err != nil {
		t.Fatal(err)
	}
}

// TestJournalRestoresWhatBadgerLost plays a power loss: Badger's files as
// they were at the last checkpoint (every later write to them unsynced,
// lost), the journal as its last Sync left it. Opening them replays the
// journal; the Log then holds every synced Append. With Badger's files
// as the live Log left them (nothing lost: a kill -9) the replay writes
// what Badger holds again, and the Log is the same. A torn last record
// loses only its own Append.
func TestJournalRestoresWhatBadgerLost(t *testing.T) {
	b, dir, atCheckpoint := checkpointed(t)
	if b.j == nil {
		t.Fatal("no journal")
	}
	afterSecond := dump(t, b)
	appendSync(t, b, journalBatches()[2])
	want := dump(t, b)
	journal, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	live := copyDir(t, dir, journalName)

	reopen := func(t *testing.T, badgerDir string, journal []byte) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(badgerDir, journalName), journal, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(badgerDir, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer r.Close()
		return dump(t, r)
	}
	t.Run("badger lost every write since the checkpoint", func(t *testing.T) {
		if got := reopen(t, copyDir(t, atCheckpoint, ""), journal); got != want {
			t.Fatalf("after replay:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("badger kept every write", func(t *testing.T) {
		if got := reopen(t, copyDir(t, live, ""), journal); got != want {
			t.Fatalf("after replay:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("the last record torn", func(t *testing.T) {
		torn := bytes.Clone(journal)
		// The third record (the third Append's) starts after the start
		// record and the second Append's; flip a byte in its payload.
		off := journalHeader
		_, _, p, ok := journalRecordAt(bytes.NewReader(torn), int64(off), int64(len(torn)))
		if !ok {
			t.Fatal("no second record")
		}
		off += journalHeader + len(p)
		if _, _, _, ok := journalRecordAt(bytes.NewReader(torn), int64(off), int64(len(torn))); !ok {
			t.Fatal("no third record")
		}
		torn[off+journalHeader+3] ^= 1
		if got := reopen(t, copyDir(t, atCheckpoint, ""), torn); got != afterSecond {
			t.Fatalf("after replay:\n%s\nwant the state after the second Append:\n%s", got, afterSecond)
		}
	})
	t.Run("without the journal the writes are lost", func(t *testing.T) {
		// The test's own check: the checkpoint's copy lacks them.
		empty := make([]byte, defaultJournalSize)
		if got := reopen(t, copyDir(t, atCheckpoint, ""), empty); got == want {
			t.Fatal("Badger's files at the checkpoint already hold every Append: the test shows nothing")
		}
	})
}

// TestJournalWraps runs many Appends through a journal a few times
// smaller than what they write: each time it fills, a checkpoint and a
// new cycle. The Log then holds all of it, reopened after Close and
// opened from a copy of its files taken without a Close.
func TestJournalWraps(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MemTableSize: 4 << 20}
	opts.JournalSize = 2 * (15*opts.MemTableSize/100 + journalHeader)
	b := openLog(t, dir, opts)
	cycles := map[uint64]bool{b.j.cycle: true}
	payload := bytes.Repeat([]byte("w"), 20<<10)
	for i := range uint64(300) {
		e := raftpb.Entry{Index: i/3 + 1, Term: uint64(1), Data: payload}
		appendSync(t, b, &wal.Batch{Updates: []wal.Update{{Partition: uint32(i % 3),
			Entries: []raftpb.Entry{e}}}, MetaPut: []wal.Record{{Key: "m1", Value: fmt.Append(nil, i)}}})
		cycles[b.j.cycle] = true
	}
	if len(cycles) < 4 {
		t.Fatalf("%d journal cycles for 6 MiB through a %d-byte journal; want several", len(cycles), opts.JournalSize)
	}
	want := dump(t, b)
	copied := copyDir(t, dir, "")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"closed": dir, "copied while open": copied} {
		r, err := Open(d, opts)
		if err != nil {
			t.Fatalf("%s: Open: %v", name, err)
		}
		if got := dump(t, r); got != want {
			t.Errorf("%s: reopened:\n%.2000s\nwant:\n%.2000s", name, got, want)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournalEmptyAfterClose: a clean Close leaves a journal cycle with no
// records, so the next Open replays nothing.
func TestJournalEmptyAfterClose(t *testing.T) {
	dir := t.TempDir()
	b := openLog(t, dir, Options{})
	for _, batch := range journalBatches() {
		appendSync(t, b, batch)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parseBytes(data)
	if err != nil || len(ps) != 0 {
		t.Fatalf("journal after Close: %d records, err %v; want none", len(ps), err)
	}
	if int64(len(data)) != defaultJournalSize {
		t.Fatalf("journal of %d bytes; want %d", len(data), defaultJournalSize)
	}
}

func parseBytes(data []byte) ([][]byte, error) {
	return parseJournal(bytes.NewReader(data), int64(len(data)))
}

// testJournal frames records of the given cycles and sequence numbers
// after a start record of cycle 7.
func testJournal(recs ...[2]uint64) []byte {
	j := &journal{cycle: 7}
	b := j.frame(nil, 0, nil)
	for _, r := range recs {
		j.cycle = r[0]
		var p []byte
		p = append(p, opSet)
		p = binary.AppendUvarint(p, 1)
		p = append(p, byte(r[1]))
		p = binary.AppendUvarint(p, 0)
		b = j.frame(b, r[1], p)
	}
	return append(b, make([]byte, 100)...)
}

func TestParseJournal(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want int
	}{
		{"empty file", nil, 0},
		{"zeros", make([]byte, 4096), 0},
		{"three records", testJournal([2]uint64{7, 1}, [2]uint64{7, 2}, [2]uint64{7, 3}), 3},
		{"another cycle's record ends it", testJournal([2]uint64{7, 1}, [2]uint64{9, 2}, [2]uint64{7, 3}), 1},
		{"a number out of turn ends it", testJournal([2]uint64{7, 1}, [2]uint64{7, 3}), 1},
		{"an old record ends it", testJournal([2]uint64{7, 1}, [2]uint64{7, 1}), 1},
		{"start record torn", testJournal([2]uint64{7, 1})[1:], 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := parseBytes(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != tc.want {
				t.Fatalf("%d records; want %d", len(ps), tc.want)
			}
		})
	}
	// A whole record whose operations do not decode is an error, not the
	// journal's end.
	j := &journal{cycle: 7}
	bad := j.frame(j.frame(nil, 0, nil), 1, []byte{opSet, 200})
	if _, err := parseBytes(bad); err == nil {
		t.Fatal("a whole record with a truncated operation parsed")
	}
}

// FuzzParseJournal: no input panics the journal's reader, and what it
// accepts decodes.
func FuzzParseJournal(f *testing.F) {
	f.Add(testJournal([2]uint64{7, 1}, [2]uint64{7, 2}))
	f.Add([]byte{})
	f.Add(testJournal([2]uint64{7, 1})[:40])
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := parseBytes(data)
		if err != nil {
			return
		}
		for _, p := range ps {
			if err := forOps(p, func(kind byte, k, v []byte) error { return nil }); err != nil {
				t.Fatalf("accepted a record that does not decode: %v", err)
			}
		}
	})
}

// TestFailedCommitKeepsJournal: after a commit Badger failed (injected
// here), Sync fails and Close leaves the journal's records for the next
// Open to replay.
func TestFailedCommitKeepsJournal(t *testing.T) {
	dir := t.TempDir()
	b := openLog(t, dir, Options{})
	batches := journalBatches()
	appendSync(t, b, batches[0])
	appendSync(t, b, batches[1])
	want := dump(t, b)
	b.cbMu.Lock()
	b.asyncErr = errors.New("injected")
	b.cbMu.Unlock()
	if err := b.Sync(); err == nil {
		t.Fatal("Sync after a failed commit returned nil")
	}
	if err := b.Close(); err == nil {
		t.Fatal("Close after a failed commit returned nil")
	}
	data, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := parseBytes(data); err != nil || len(ps) != 2 {
		t.Fatalf("journal after Close: %d records, err %v; want the 2 Appends'", len(ps), err)
	}
	r, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := dump(t, r); got != want {
		t.Fatalf("reopened:\n%s\nwant:\n%s", got, want)
	}
}

// TestJournalResized: a journal made with another size is replayed before
// it is made over at the new size.
func TestJournalResized(t *testing.T) {
	b, dir, atCheckpoint := checkpointed(t)
	want := dump(t, b)
	copyFile(t, filepath.Join(dir, journalName), filepath.Join(atCheckpoint, journalName))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	// Until the replay's checkpoint the file must stay as it is: a crash
	// before it replays the same records again.
	path := filepath.Join(atCheckpoint, journalName)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, ps, err := openJournal(path, size)
	if err != nil || len(ps) != 1 {
		t.Fatalf("openJournal: %d records, %v; want the second Append's", len(ps), err)
	}
	_ = j.close()
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("openJournal changed the file before any replay (%v)", err)
	}
	r, err := Open(atCheckpoint, Options{JournalSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := dump(t, r); got != want {
		t.Fatalf("reopened with another journal size:\n%s\nwant:\n%s", got, want)
	}
	if st, err := os.Stat(filepath.Join(atCheckpoint, journalName)); err != nil || st.Size() != size {
		t.Fatalf("journal after Open: %v, %v; want %d bytes", st.Size(), err, size)
	}
}

// The journal is the owner's alone: it holds entries' payloads (it was
// made 0644).
func TestJournalOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), journalName)
	j, _, err := openJournal(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("journal: %v, %v; want mode 0600", st.Mode(), err)
	}
}
