package peer

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/wal"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestMemMeshPlacementMismatch: a peer started with another --replicas or
// --placement than the mesh it joins stops with an error naming the
// mesh's flags, and the mesh never takes it in; the mesh keeps serving.
// (The check itself is the Node's: TestMeshRefusesOtherPlacement.)
func TestMemMeshPlacementMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn, peers := startMemMesh(t, 2, 16)
		for _, tc := range []struct {
			id   string
			cfg  Config
			want error
		}{
			{"bad-replicas", Config{Slots: 2, Partitions: 16, Replicas: 2}, node.ErrReplicas},
			{"bad-placement", Config{Slots: 2, Partitions: 16, Placement: ring.PlacementCircle, PlacementSet: true}, node.ErrPlacement},
		} {
			tc.cfg.Join = []string{"/memory/p0"}
			mp := startMemPeer(t, mn, tc.id, tc.cfg)
			select {
			case <-mp.done:
			case <-time.After(time.Minute):
				t.Fatalf("%s still runs a minute after joining", tc.id)
			}
			if !errors.Is(mp.err, tc.want) {
				t.Errorf("%s: Run = %v; want %v", tc.id, mp.err, tc.want)
			}
			mp.err = nil // expected: stop must not report it
			for _, p := range peers {
				var members []node.MemberInfo
				_ = p.p.read(t.Context(), func(n *node.Node) error { members = n.Members(); return nil })
				if slices.ContainsFunc(members, func(m node.MemberInfo) bool { return m.ID == tc.id }) {
					t.Errorf("%s took %s as a member", p.p.tr.ID(), tc.id)
				}
			}
		}
		submitRetrying(t, peers[1].c, `{"mode":"parallel","key":"after","tasks":[{"handler":"echo","payload":1}]}`)
	})
}

// TestMeshSettingsRecorded: a new data dir records spread, or the
// --placement given; one an earlier release created (its partition count
// recorded, no placement) keeps circle; a later start uses the record,
// and one with another --placement is refused, naming the recorded one.
func TestMeshSettingsRecorded(t *testing.T) {
	open := func(log wal.Log, cfg Config) (int, ring.Placement, error) {
		p := &Peer{cfg: cfg, wal: log, log: slog.New(slog.DiscardHandler)}
		return p.meshSettings()
	}
	fresh := wal.NewMemory()
	if parts, pl, err := open(fresh, Config{Partitions: 64}); err != nil || parts != 64 || pl != ring.PlacementSpread {
		t.Fatalf("new data dir: %d partitions, %v, %v; want 64, spread", parts, pl, err)
	}
	if parts, pl, err := open(fresh, Config{Partitions: 256}); err != nil || parts != 64 || pl != ring.PlacementSpread {
		t.Errorf("restart: %d partitions, %v, %v; want the recorded 64, spread", parts, pl, err)
	}
	// It holds no partition yet: another --placement replaces the record
	// (a start the mesh refused for its placement recorded it).
	if _, pl, err := open(fresh, Config{Partitions: 64, Placement: ring.PlacementCircle, PlacementSet: true}); err != nil || pl != ring.PlacementCircle {
		t.Errorf("restart of a data dir without partitions with --placement circle: %v, %v; want circle", pl, err)
	}
	if err := fresh.Append(&wal.Batch{Updates: []wal.Update{{Partition: 3, HardState: pb.HardState{Term: uint64(1), Vote: uint64(1), Commit: uint64(0)}}}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := open(fresh, Config{Partitions: 64, Placement: ring.PlacementSpread, PlacementSet: true})
	if err == nil || !strings.Contains(err.Error(), "--placement circle") {
		t.Errorf("restart of a data dir with a partition with --placement spread: %v; want an error naming --placement circle", err)
	}

	old := wal.NewMemory() // as an earlier release left it
	if err := old.Append(&wal.Batch{MetaPut: []wal.Record{{Key: "partitions", Value: binary.BigEndian.AppendUint32(nil, 256)}}}); err != nil {
		t.Fatal(err)
	}
	if _, pl, err := open(old, Config{Partitions: 256}); err != nil || pl != ring.PlacementCircle {
		t.Errorf("earlier release's data dir: %v, %v; want circle", pl, err)
	}
	if _, pl, err := open(old, Config{Partitions: 256}); err != nil || pl != ring.PlacementCircle {
		t.Errorf("earlier release's data dir, restarted: %v, %v; want circle, recorded", pl, err)
	}

	chosen := wal.NewMemory()
	if _, pl, err := open(chosen, Config{Partitions: 256, Placement: ring.PlacementCircle, PlacementSet: true}); err != nil || pl != ring.PlacementCircle {
		t.Errorf("new data dir with --placement circle: %v, %v", pl, err)
	}
	if _, pl, err := open(chosen, Config{Partitions: 256}); err != nil || pl != ring.PlacementCircle {
		t.Errorf("its restart without the flag: %v, %v; want the recorded circle", pl, err)
	}
}
