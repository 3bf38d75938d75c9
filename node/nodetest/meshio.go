package nodetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// meshIO is a Mesh peer's node.DriverIO.
type meshIO struct{ p *Peer }

func (io meshIO) Now() time.Time { return io.p.m.Now }

func (io meshIO) Send(envs []node.Envelope) {
	// Called with rd.Early before the persist, rd.Messages after it
	// (p.early, from the driver's Trace, tells which).
	for i := range envs {
		io.sent(envs[i])
	}
}

func (io meshIO) sent(e node.Envelope) {
	io.p.sentEarly = io.p.sentEarly || io.p.early
	if io.p.Mute != nil && io.p.Mute(&e.Msg) {
		return
	}
	io.p.m.send(io.p.ID, e, io.p.early)
}

func (io meshIO) Gossip(msgs []node.Message) {
	if io.p.m.Now.Before(io.p.m.GossipFrom) {
		return
	}
	for _, g := range msgs {
		for _, to := range io.p.m.Peers {
			if to.ID != io.p.ID && !to.clone { // not to itself, and once to an id with a clone (Clone)
				io.sent(node.Envelope{To: to.ID, Msg: g})
			}
		}
	}
}

func (io meshIO) Persist(b *wal.Batch, sync bool) error {
	if io.p.CrashAfterEarly && io.p.sentEarly {
		return errCrashed
	}
	if err := io.p.Log.Append(b); err != nil {
		return err
	}
	if sync {
		return io.p.Log.Sync()
	}
	return nil
}

func (io meshIO) Start(rd *node.Ready) {
	p := io.p
	for _, r := range rd.Run {
		if p.m.OnRun != nil {
			p.m.OnRun(p, r)
		}
	}
	p.Runs = append(p.Runs, rd.Run...)
	p.Notify = append(p.Notify, rd.Notify...)
}

func (io meshIO) Deliver(rd *node.Ready) error {
	p := io.p
	for _, r := range rd.Replies {
		p.Replies[r.Req] = r
	}
	if p.m.OnChange != nil {
		for _, c := range rd.Changes {
			p.m.OnChange(p, c)
		}
	}
	return nil
}

// Serving returns the live peers that serve partition part, in order
// (more than one: a bug).
func (m *Mesh) Serving(part int) []string {
	var out []string
	for _, p := range m.Peers {
		if r, ok := p.Node.Replica(part); ok && !p.Down && r.Serving {
			out = append(out, p.ID)
		}
	}
	return out
}

// Server returns the one live peer that serves partition part ("" if
// none or several).
func (m *Mesh) Server(part int) string {
	if s := m.Serving(part); len(s) == 1 {
		return s[0]
	}
	return ""
}

// PartitionOf returns the partition of group g.
func (m *Mesh) PartitionOf(g shard.GroupID) int { return m.Peers[0].Node.PartitionOf(g) }

// GroupIn returns the first group id prefix0, prefix1, ... that falls in
// partition part.
func (m *Mesh) GroupIn(prefix string, part int) shard.GroupID {
	for i := range 100_000 {
		if g := shard.GroupID(fmt.Sprint(prefix, i)); m.PartitionOf(g) == part {
			return g
		}
	}
	m.tb.Fatalf("nodetest: no group id in partition %d", part)
	return ""
}

// Do runs f with a new request id on the peer id, then steps the mesh
// until the peer replies (at most d); ok is false without a reply.
func (m *Mesh) Do(id string, d time.Duration, f func(n *node.Node, req uint64)) (r node.Reply, ok bool) {
	p := m.MustPeer(id)
	req := p.Node.NextRequest()
	f(p.Node, req)
	p.Drive()
	m.RunUntil(d, func() bool { r, ok = p.Replies[req]; return ok })
	return r, ok
}

// Submit submits spec to the peer serving its partition (waiting up to
// 3 s for one) and returns the reply; ok is false if none came.
func (m *Mesh) Submit(spec shard.GroupSpec) (r node.Reply, ok bool) {
	part := m.PartitionOf(spec.ID)
	if !m.RunUntil(3*time.Second, func() bool { return m.Server(part) != "" }) {
		return node.Reply{}, false
	}
	return m.Do(m.Server(part), 3*time.Second, func(n *node.Node, req uint64) { n.Submit(req, &spec) })
}

// Report reports the outcome of the run of task held by peer id (see
// HoldRuns) and returns what the node said; the run is no longer held.
func (m *Mesh) Report(id string, task shard.TaskID, ok bool) error {
	p := m.MustPeer(id)
	i := slices.IndexFunc(p.Runs, func(r node.Run) bool { return r.Task == task })
	if i < 0 {
		return fmt.Errorf("nodetest: %s runs no %s", id, task)
	}
	r := p.Runs[i]
	p.Runs = slices.Delete(p.Runs, i, i+1)
	o := shard.Outcome{Task: r.Task, Round: r.Round, OK: ok, Result: r.Payload, Took: 100 * time.Millisecond}
	if !ok {
		o.Error = "failed"
	}
	err := p.Node.Report(o)
	p.Drive()
	return err
}

// ReportAs reports an outcome of the given round that the peer's handler
// is not running (a late or a forged one) and returns what the node said.
func (m *Mesh) ReportAs(id string, task shard.TaskID, round shard.Round, ok bool) error {
	p := m.MustPeer(id)
	err := p.Node.Report(shard.Outcome{Task: task, Round: round, OK: ok, Result: []byte(`"late"`), Took: time.Millisecond})
	p.Drive()
	return err
}
