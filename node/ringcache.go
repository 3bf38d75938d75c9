package node

import (
	"slices"
	"sync"

	"github.com/needle-mesh/needle/ring"
)

// RingCache remembers the last few rings built and preferred-owner passes
// computed, keyed by their inputs, for nodes of one process that share it
// (NodeConfig.Rings). Rings are immutable (ring.Ring), and the owner lists
// it returns are only read. Safe for concurrent use; a nil *RingCache
// computes everything afresh.
type RingCache struct {
	mu    sync.Mutex
	rings []cachedRing
	prefs []cachedPreferred
}

// ringCacheSize bounds each list of the cache: a mesh converges on one
// membership, so a few entries catch nearly every repeat.
const ringCacheSize = 4

type cachedRing struct {
	cfg     ring.Config
	epoch   ring.Epoch
	members []ring.PeerID
	r       *ring.Ring
}

type cachedPreferred struct {
	r     *ring.Ring
	alive []bool // by member of r
	out   []ring.PeerID
}

// NewRingCache returns an empty cache.
func NewRingCache() *RingCache { return &RingCache{} }

func (c *RingCache) build(cfg ring.Config, epoch ring.Epoch, members []ring.PeerID) (*ring.Ring, error) {
	if c == nil {
		return ring.New(cfg, epoch, members)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.rings {
		if e.cfg == cfg && e.epoch == epoch && slices.Equal(e.members, members) {
			c.rings = touch(c.rings, i)
			return e.r, nil
		}
	}
	r, err := ring.New(cfg, epoch, members)
	if err != nil {
		return nil, err
	}
	c.rings = pushBounded(c.rings, cachedRing{cfg: cfg, epoch: epoch, members: slices.Clone(members), r: r})
	return r, nil
}

func (c *RingCache) preferredOwners(r *ring.Ring, live func(ring.PeerID) bool) []ring.PeerID {
	if c == nil {
		return r.PreferredOwners(live)
	}
	members := r.Members()
	alive := make([]bool, len(members))
	for i, id := range members {
		alive[i] = live(id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.prefs {
		if e.r == r && slices.Equal(e.alive, alive) {
			c.prefs = touch(c.prefs, i)
			return e.out
		}
	}
	out := r.PreferredOwners(func(id ring.PeerID) bool {
		i, _ := slices.BinarySearch(members, id)
		return alive[i]
	})
	c.prefs = pushBounded(c.prefs, cachedPreferred{r: r, alive: alive, out: out})
	return out
}

// touch moves entry i to the end of list, the last to be dropped: a
// mesh starting together builds each peer's lone ring between two uses
// of the shared one, which a first-in-first-out list dropped every few
// peers (a 1,000-member ring built again and again).
func touch[T any](list []T, i int) []T {
	e := list[i]
	copy(list[i:], list[i+1:])
	list[len(list)-1] = e
	return list
}

// pushBounded appends e, dropping the least recently used entry beyond
// ringCacheSize.
func pushBounded[T any](list []T, e T) []T {
	if len(list) >= ringCacheSize {
		list = append(list[:0], list[1:]...)
	}
	return append(list, e)
}
