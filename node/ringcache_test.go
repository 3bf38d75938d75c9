package node

import (
	"fmt"
	"testing"

	"github.com/needle-mesh/needle/ring"
)

// TestRingCacheKeepsWhatIsUsed: a ring used between builds of others stays
// cached (least recently used goes first): a mesh starting together builds
// each peer's lone ring between two uses of the shared one, and a
// first-in-first-out cache built the shared one again every few peers.
func TestRingCacheKeepsWhatIsUsed(t *testing.T) {
	c := NewRingCache()
	cfg := ring.DefaultConfig()
	cfg.Partitions = 64
	shared := []ring.PeerID{"a", "b", "c", "d"}
	first, err := c.build(cfg, 2, shared)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * ringCacheSize {
		if _, err := c.build(cfg, 1, []ring.PeerID{ring.PeerID(fmt.Sprint("lone", i))}); err != nil {
			t.Fatal(err)
		}
		again, err := c.build(cfg, 2, shared)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Fatalf("after %d other rings the shared ring was built again", i+1)
		}
	}
}
