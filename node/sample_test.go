package node

import (
	"testing"
	"time"
)

// An idle mesh's thieves know of no work, so each asks a random member
// now and then (a load announcement may have been lost), with a wait that
// doubles from 250 ms to 4 s: a handful of blind asks in 15 s, counted
// apart from the steals asked of peers known to have work.
func TestIdleThievesAskBlindAndRarely(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	for _, id := range []string{"n1", "n2", "n3"} {
		st := c.node(id).n.Counters()
		if st.StealsSampled < 1 || st.StealsSampled > 10 || st.StealsAsked != st.StealsSampled {
			t.Errorf("%s: %d blind asks of %d asked in 15 idle seconds; want 1-10, and no other", id, st.StealsSampled, st.StealsAsked)
		}
	}
}
