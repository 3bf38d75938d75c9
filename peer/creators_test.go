package peer

import (
	"fmt"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// A request that created its group is answered so when asked again; a
// repeat under another name, none, or an evicted one is not.
func TestCreatorsNote(t *testing.T) {
	var c creators
	if !c.note("r1", "k1", true) || !c.note("r1", "k1", false) {
		t.Fatal("r1 created k1, then asked again: want created both times")
	}
	if c.note("r2", "k1", false) || c.note("", "k1", false) || c.note("r1", "k2", false) {
		t.Fatal("another request, none, or r1 about another group: want not created")
	}
	for i := range maxCreators {
		c.note(fmt.Sprintf("x%d", i), shard.GroupID(fmt.Sprintf("g%d", i)), true)
	}
	if c.note("r1", "k1", false) || len(c.by) != maxCreators || len(c.order) != maxCreators {
		t.Fatalf("after %d more: r1 remembered, or %d/%d kept; want r1 evicted, %d kept", maxCreators, len(c.by), len(c.order), maxCreators)
	}
}
