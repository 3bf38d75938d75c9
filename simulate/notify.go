package simulate

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Webhooks. A quarter of the generated groups carry a notify URL (picked
// by a hash of the group id, so the workload's random draws are those of a
// run without webhooks). The simulated receiver answers each delivery
// after 1-40 ms and refuses about a quarter of them ("503"), decided by a
// hash of (seed, group, attempt): the same run replays the same answers.
// The checker holds the Node to: a delivery is only for a group that
// finished, and a group whose webhook reads "delivered" was accepted by the
// receiver at least once.

// simHook is the URL of the simulated receiver.
const simHook = "http://receiver.sim/hook"

// wantsNotify reports whether the generated group id gets a webhook.
func wantsNotify(id shard.GroupID) bool {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()%4 == 0
}

// hookAnswer is the simulated receiver's answer to one delivery: how long
// it takes and whether it fails.
func (s *sim) hookAnswer(j shard.NotifyJob) (time.Duration, bool) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", s.cfg.Seed, j.Group, j.Attempt)
	v := h.Sum64()
	return time.Duration(1+v%40) * time.Millisecond, (v>>16)%4 == 0
}

// deliver makes a webhook call the Node handed out: the receiver sees it
// (and counts it when it accepts), and the answer comes back to the node
// as an input, unless the node crashed or restarted meanwhile.
func (nd *simNode) deliver(j node.NotifyJob) {
	s, gen := nd.s, nd.gen
	if !j.Group.State.Terminal() {
		s.fail(invOutcome, fmt.Sprintf("%s: webhook of %s handed out while the group is %v", nd.id, j.NotifyJob.Group, j.Group.State))
		return
	}
	d, fails := s.hookAnswer(j.NotifyJob)
	s.after(nd.clk.virtual(d), func() {
		msg := ""
		if fails {
			msg = "simulated receiver: status 503"
		} else {
			s.chk.hooked[j.NotifyJob.Group]++
		}
		nd.input(gen, func() { nd.n.NotifyDone(j.NotifyJob, msg, false) })
	})
}

// checkNotify verifies, at the end of a run, that every webhook that reads
// delivered reached the receiver.
func (c *checker) checkNotify() {
	for _, g := range c.order {
		nd := c.s.serving(g.id)
		if !g.acked || nd == nil || g.spec.Notify == "" {
			continue
		}
		v, err := nd.n.Group(g.id)
		if err != nil || v.Notify == nil {
			continue
		}
		if v.Notify.State == "delivered" && c.hooked[g.id] == 0 {
			c.s.fail(invOutcome, fmt.Sprintf("n%d: webhook of %s reads delivered; the receiver accepted none", nd.idx, g.id))
			return
		}
		if v.Notify.State == "delivered" {
			c.hooksDelivered++
		}
	}
}
