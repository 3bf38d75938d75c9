package waltest

import (
	"testing"

	"github.com/needle-mesh/needle/wal"
)

// Crasher opens a fresh Log; crash simulates kill -9 plus power loss (every
// unsynced Append is lost) and returns the Log reopened over what survived.
type Crasher func(t *testing.T) (l wal.Log, crash func() wal.Log)

// RunCrash checks that a crash drops exactly the Appends made since the
// last Sync, whole batches at a time.
func RunCrash(t *testing.T, open Crasher) {
	l, crash := open(t)
	MustAppend(t, l, &wal.Batch{
		Updates:   []wal.Update{{Partition: 1, HardState: HS(1, 1, 2), Entries: Ents(1, 3, 1)}},
		OutboxPut: []wal.Record{{Key: "synced", Value: []byte("1")}},
	})
	unsynced := []*wal.Batch{
		{Updates: []wal.Update{{Partition: 1, HardState: HS(2, 2, 3), Entries: Ents(3, 5, 2)}}},
		{Updates: []wal.Update{{Partition: 2, Entries: Ents(1, 1, 1)}}, OutboxDel: []string{"synced"}},
		{OutboxPut: []wal.Record{{Key: "unsynced", Value: []byte("2")}}, MetaPut: []wal.Record{{Key: "m", Value: []byte("x")}}},
	}
	for _, b := range unsynced {
		if err := l.Append(b); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	CheckState(t, "before crash", MustLoad(t, l, 1), wal.PartitionState{
		HardState: HS(2, 2, 3), Entries: append(Ents(1, 2, 1), Ents(3, 5, 2)...),
	})
	l = crash()
	CheckState(t, "after crash", MustLoad(t, l, 1), wal.PartitionState{HardState: HS(1, 1, 2), Entries: Ents(1, 3, 1)})
	if ps, err := l.Partitions(); err != nil || len(ps) != 1 {
		t.Errorf("Partitions() = %v, %v; want [1]", ps, err)
	}
	checkOutbox(t, l, []wal.Record{{Key: "synced", Value: []byte("1")}})
	if _, ok, _ := l.Meta("m"); ok {
		t.Errorf("Meta(m) survived the crash")
	}
	// The restarted Log works: the same updates apply again.
	for _, b := range unsynced {
		MustAppend(t, l, b)
	}
	l = crash()
	checkOutbox(t, l, []wal.Record{{Key: "unsynced", Value: []byte("2")}})
	CheckState(t, "after second crash", MustLoad(t, l, 2), wal.PartitionState{Entries: Ents(1, 1, 1)})
	// An unsynced drop is lost like any other change.
	if err := l.Append(&wal.Batch{Updates: []wal.Update{{Partition: 2, Drop: true}}}); err != nil {
		t.Fatalf("Append(drop): %v", err)
	}
	CheckState(t, "dropped before crash", MustLoad(t, l, 2), wal.PartitionState{})
	l = crash()
	CheckState(t, "drop lost by the crash", MustLoad(t, l, 2), wal.PartitionState{Entries: Ents(1, 1, 1)})
}
