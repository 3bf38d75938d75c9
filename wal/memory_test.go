package wal_test

import (
	"slices"
	"testing"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/waltest"
)

func TestMemory(t *testing.T) {
	waltest.Run(t, func(t *testing.T) (wal.Log, func() wal.Log) {
		m := wal.NewMemory()
		return m, func() wal.Log {
			if err := m.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return m
		}
	})
}

func TestMemoryCrash(t *testing.T) {
	waltest.RunCrash(t, func(t *testing.T) (wal.Log, func() wal.Log) {
		m := wal.NewMemory()
		return m, func() wal.Log { m.Crash(); return m }
	})
}

func TestMemoryClone(t *testing.T) {
	m := wal.NewMemory()
	waltest.MustAppend(t, m, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: waltest.Ents(1, 3, 1)}}})
	c := m.Clone()
	// Diverge: the original truncates and appends, the clone appends.
	waltest.MustAppend(t, m, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: waltest.Ents(3, 4, 2)}}})
	waltest.MustAppend(t, c, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: waltest.Ents(4, 5, 1)}}})
	waltest.CheckState(t, "original", waltest.MustLoad(t, m, 1),
		wal.PartitionState{Entries: append(waltest.Ents(1, 2, 1), waltest.Ents(3, 4, 2)...)})
	waltest.CheckState(t, "clone", waltest.MustLoad(t, c, 1), wal.PartitionState{Entries: waltest.Ents(1, 5, 1)})
	// Unsynced appends are cloned as unsynced.
	if err := m.Append(&wal.Batch{MetaPut: []wal.Record{{Key: "k", Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	c2 := m.Clone()
	c2.Crash()
	if _, ok, _ := c2.Meta("k"); ok {
		t.Errorf("clone kept an unsynced record across Crash")
	}
	if _, ok, _ := m.Meta("k"); !ok {
		t.Errorf("Crash of a clone changed the original")
	}
}

func TestMemoryDeterministic(t *testing.T) {
	run := func() ([]uint32, []wal.Record) {
		m := wal.NewMemory()
		var b wal.Batch
		for i := range 100 {
			p := uint32(i * 37 % 101)
			b.Updates = append(b.Updates, wal.Update{Partition: p, Entries: waltest.Ents(1, 1, 1)})
			b.OutboxPut = append(b.OutboxPut, wal.Record{Key: string(rune('a' + i%26)), Value: []byte{byte(i)}})
		}
		waltest.MustAppend(t, m, &b)
		ps, _ := m.Partitions()
		ob, _ := m.Outbox()
		return ps, ob
	}
	p1, o1 := run()
	p2, o2 := run()
	if !slices.Equal(p1, p2) || !slices.IsSorted(p1) || len(o1) != len(o2) {
		t.Errorf("Partitions or Outbox differ between runs or are unsorted")
	}
}
