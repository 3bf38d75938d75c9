package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestMemStorageMatchesRaft drives memStorage and raft.MemoryStorage with
// the same random calls (appends that overwrite a suffix, compactions,
// snapshots made and applied, hard states) and checks that every answer
// and every error is the same, panics included.
func TestMemStorageMatchesRaft(t *testing.T) {
	// Raft logs its panics before it panics: quiet here.
	raft.SetLogger(&raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)})
	defer raft.ResetDefaultLogger()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		ours, theirs := newMemStorage(), raft.NewMemoryStorage()
		term := uint64(1)
		for step := range 300 {
			var call string
			var a, b any
			switch op := rng.IntN(9); op {
			case 0, 1: // append, possibly overwriting a suffix or below the first index
				last, _ := theirs.LastIndex()
				from := max(int64(last)+1-rng.Int64N(4), 1)
				if rng.IntN(10) == 0 {
					term++
				}
				n := 1 + rng.IntN(4)
				ents := make([]pb.Entry, n)
				for i := range ents {
					ents[i] = pb.Entry{Index: uint64(from) + uint64(i), Term: term, Data: make([]byte, rng.IntN(40))}
				}
				call = fmt.Sprintf("Append(%d..%d)", from, uint64(from)+uint64(n)-1)
				a, b = catch(func() any { return ours.Append(ents) }), catch(func() any { return theirs.Append(ents) })
			case 2:
				i := uint64(rng.IntN(60))
				call = fmt.Sprintf("Compact(%d)", i)
				a, b = catch(func() any { return ours.Compact(i) }), catch(func() any { return theirs.Compact(i) })
			case 3:
				i := uint64(rng.IntN(60))
				cs := &pb.ConfState{Voters: []uint64{1, uint64(rng.IntN(3) + 2)}}
				if rng.IntN(2) == 0 {
					cs = nil
				}
				data := []byte{byte(step)}
				call = fmt.Sprintf("CreateSnapshot(%d)", i)
				a = catch(func() any { s, err := ours.CreateSnapshot(i, cs, data); return pair(s, err) })
				b = catch(func() any { s, err := theirs.CreateSnapshot(i, cs, data); return pair(s, err) })
			case 4:
				i := uint64(rng.IntN(80))
				snap := pb.Snapshot{Data: []byte{1, 2}, Metadata: pb.SnapshotMetadata{Index: i, Term: term,
					ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}}}}
				call = fmt.Sprintf("ApplySnapshot(%d)", i)
				a, b = catch(func() any { return ours.ApplySnapshot(snap) }), catch(func() any { return theirs.ApplySnapshot(snap) })
			case 5:
				hs := pb.HardState{Term: term, Commit: uint64(rng.IntN(50))}
				call = "SetHardState"
				a, b = ours.SetHardState(hs), theirs.SetHardState(hs)
			case 6:
				// Mostly within the log, at times around it.
				first, _ := theirs.FirstIndex()
				last, _ := theirs.LastIndex()
				lo := uint64(max(int64(first)-1+rng.Int64N(int64(last-first)+3), 0))
				hi := lo + uint64(rng.IntN(6))
				if rng.IntN(8) == 0 {
					hi += 3
				}
				max := uint64(rng.IntN(200))
				call = fmt.Sprintf("Entries(%d, %d, %d)", lo, hi, max)
				a = catch(func() any { e, err := ours.Entries(lo, hi, max); return pair(e, err) })
				b = catch(func() any { e, err := theirs.Entries(lo, hi, max); return pair(e, err) })
			case 7:
				i := uint64(rng.IntN(70))
				call = fmt.Sprintf("Term(%d)", i)
				a = catch(func() any { v, err := ours.Term(i); return pair(v, err) })
				b = catch(func() any { v, err := theirs.Term(i); return pair(v, err) })
			case 8:
				call = "Snapshot"
				a = catch(func() any { s, err := ours.Snapshot(); return pair(s, err) })
				b = catch(func() any { s, err := theirs.Snapshot(); return pair(s, err) })
			}
			if !same(a, b) {
				t.Fatalf("seed %d step %d: %s: memStorage %v, raft.MemoryStorage %v", seed, step, call, a, b)
			}
			// Every read agrees after every call.
			fi, _ := ours.FirstIndex()
			fj, _ := theirs.FirstIndex()
			li, _ := ours.LastIndex()
			lj, _ := theirs.LastIndex()
			hs, cs, _ := ours.InitialState()
			hs2, cs2, _ := theirs.InitialState()
			if fi != fj || li != lj || hs != hs2 || !equalMsg(&cs, &cs2) {
				t.Fatalf("seed %d step %d after %s: first %d/%d last %d/%d state %v %v / %v %v", seed, step, call, fi, fj, li, lj, hs, cs, hs2, cs2)
			}
		}
	}
}

type result struct {
	v   any
	err error
}

func pair(v any, err error) result { return result{v, err} }

// catch returns f's result, or the panic's value as "panic: ...".
func catch(f func() any) (out any) {
	defer func() {
		if r := recover(); r != nil {
			out = "panic"
		}
	}()
	return f()
}

func same(a, b any) bool {
	switch x := a.(type) {
	case result:
		y, ok := b.(result)
		if !ok || !errors.Is(x.err, y.err) && x.err != y.err {
			return false
		}
		return sameValue(x.v, y.v)
	case error:
		y, _ := b.(error)
		return errors.Is(x, y) || x == y
	}
	return a == b
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []pb.Entry:
		y := b.([]pb.Entry)
		if len(x) != len(y) || cap(x) != cap(y) {
			return false
		}
		for i := range x {
			if !equalMsg(&x[i], &y[i]) {
				return false
			}
		}
		return true
	case pb.Snapshot:
		y := b.(pb.Snapshot)
		return equalMsg(&x, &y)
	}
	return a == b
}

// equalMsg reports whether two raftpb messages encode the same.
func equalMsg(a, b interface{ Marshal() ([]byte, error) }) bool {
	x, errX := a.Marshal()
	y, errY := b.Marshal()
	return errX == nil && errY == nil && bytes.Equal(x, y)
}
