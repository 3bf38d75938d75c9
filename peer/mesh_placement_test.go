package peer

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/ring"
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
			{"bad-placement", Config{Slots: 2, Partitions: 16, Placement: ring.PlacementSpread}, node.ErrPlacement},
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
