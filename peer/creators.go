package peer

import (
	"sync"

	"github.com/needle-mesh/needle/shard"
)

// creators remembers, on an owner, which forwarded requests created their
// group: a keyed submission that waits (POST /v1/tasks?wait=) names its
// request (submitReq.Req), and when a revocation cut the forwarded wait the
// forwarding peer asks again without one. The group then exists, and was
// answered 200 (a repeat of the key) where this very request had created
// it; with the name remembered here it is answered 201. In memory only: an
// owner that changed (or restarted) in between answers 200, as a peer of
// a release without Req does.
type creators struct {
	mu    sync.Mutex
	by    map[string]shard.GroupID
	order []string // oldest first, at most maxCreators
}

// maxCreators bounds the requests remembered: a cut wait asks again at
// once, so the last few thousand are plenty.
const maxCreators = 4096

// note records that request req was answered about group g, created by it
// or not, and reports whether req created g (now, or when asked before).
func (c *creators) note(req string, g shard.GroupID, created bool) bool {
	if req == "" {
		return created
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !created {
		return c.by[req] == g
	}
	if c.by == nil {
		c.by = map[string]shard.GroupID{}
	}
	if _, ok := c.by[req]; !ok {
		if len(c.order) == maxCreators {
			delete(c.by, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, req)
	}
	c.by[req] = g
	return true
}
