package node_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// TestTranscripts runs the transcripts of testdata/*.txt: each is a
// scenario written in a small command language over nodetest.Mesh (see
// transcript_cmds_test.go for the commands), with the events that matter
// (leadership, replica sets, runs, grants, outcomes, acks, terminal
// states) printed after each command. Regenerate with
//
//	go test ./node -run TestTranscripts -rewrite
//
// and review the diff.
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := &env{t: t}
		datadriven.RunTest(t, path, e.run)
	})
}

// env is one transcript's state: the mesh and what its events last showed.
type env struct {
	t   *testing.T
	m   *nodetest.Mesh
	out strings.Builder // events since the last command's output
	// seen counts the events of the current command by text: a repeat
	// (an outbox re-sending every half second) is counted, not printed.
	seen map[string]int
	show map[string]bool // event kinds printed (log)
	// last state printed, to print changes only
	servers    []string
	confs      []string
	abdicated  map[string]bool
	terminal   map[string]bool // task/state already printed
	stepped    map[string]int  // refusals printed, by peer
	grantsOn   map[nodetest.Link]int
	persisting map[string]bool // a peer's driver is persisting (duties) // tasks granted on a link and delivered or held (wait grant)
}

// defaultLog is what a transcript prints unless it says otherwise (log).
var defaultLog = []string{"leaders", "conf", "runs", "grants", "outcomes", "acks", "states", "refusals"}

func (e *env) run(t *testing.T, d *datadriven.TestData) string {
	e.t = t
	out, err := e.command(d)
	if err != nil {
		d.Fatalf(t, "%s: %v", d.Pos, err)
	}
	e.observe()
	ev := e.events()
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	if ev+out == "" {
		return "ok\n"
	}
	return ev + out
}

// start builds the mesh and hooks its events.
func (e *env) start(peers, parts int) {
	// Every handler but echo is external: workers serve it (workers).
	e.m = nodetest.NewMeshWith(e.t, peers, parts, func(_ *nodetest.Peer, cfg *node.NodeConfig) {
		cfg.Shard.External = func(h string) bool { return h != "echo" }
	})
	e.seen = map[string]int{}
	e.show = map[string]bool{}
	for _, k := range defaultLog {
		e.show[k] = true
	}
	e.servers, e.confs = make([]string, parts), make([]string, parts)
	e.abdicated, e.terminal, e.stepped = map[string]bool{}, map[string]bool{}, map[string]int{}
	e.grantsOn, e.persisting = map[nodetest.Link]int{}, map[string]bool{}
	e.m.OnSend = e.sent
	e.m.OnRun = func(p *nodetest.Peer, r node.Run) {
		worker := ""
		if r.External {
			worker = " (worker)"
		}
		e.logf("runs", "%s runs %s round %d%s", p.ID, r.Task, r.Round, worker)
	}
	e.m.OnChange = func(p *nodetest.Peer, c shard.Change) {
		k := fmt.Sprint(c.Task, c.State)
		if c.State.Terminal() && !e.terminal[k] {
			e.terminal[k] = true
			e.logf("states", "%s %v", c.Task, c.State)
		}
	}
	e.m.OnDuty = func(p *nodetest.Peer, d node.Duty, rd *node.Ready) {
		// Printed at the duty after the persist: a crash (crash
		// after-early) stops the Ready before it.
		if (d == node.DutySend || d == node.DutyDeliver) && e.persisting[p.ID] {
			e.logf("duties", "%s persisted %d entries (%d messages sent early)", p.ID, entries(&rd.Persist), len(rd.Early))
		}
		e.persisting[p.ID] = d == node.DutyPersist && len(rd.Persist.Updates) > 0
	}
	e.m.Check = e.observe
}

// resent are the event kinds of messages that peers re-send until
// answered (outboxes, steal requests): one line per command each, with
// its count.
var resent = map[string]bool{"grants": true, "outcomes": true, "acks": true, "steals": true, "refusals": true}

// logf records an event of kind k, with the virtual time (of its first
// occurrence in the current command, for the kinds in resent).
func (e *env) logf(k, format string, args ...any) {
	if !e.show[k] {
		return
	}
	text := fmt.Sprintf(format, args...)
	key := text
	if !resent[k] {
		key = e.at() + text // a transition: printed each time
	}
	if e.seen[key] == 0 {
		fmt.Fprintf(&e.out, "%s %s\x00%s\n", e.at(), text, key)
	}
	e.seen[key]++
}

// events returns the current command's events, each once, with its
// count when it repeated, and starts over.
func (e *env) events() string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(e.out.String(), "\n") {
		head, key, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\x00")
		if !ok {
			continue
		}
		if n := e.seen[key]; n > 1 {
			head += fmt.Sprintf(" (x%d)", n)
		}
		b.WriteString(head + "\n")
	}
	e.out.Reset()
	clear(e.seen)
	return b.String()
}

func (e *env) at() string {
	return fmt.Sprintf("[%7.2fs]", e.m.Now.Sub(nodetest.Epoch).Seconds())
}

// sent prints the messages that matter.
func (e *env) sent(s nodetest.Sent) {
	fate := ""
	if s.Fate != "" {
		fate = " (" + s.Fate + ")"
	}
	m := s.Msg
	switch m.Type {
	case node.MsgGrant:
		if s.Fate == "" || s.Fate == "held" {
			e.grantsOn[nodetest.Link{From: s.From, To: s.To}] += len(m.Grants)
		}
		if m.NotNow {
			e.logf("grants", "%s -> %s grant not now%s", s.From, s.To, fate)
			return
		}
		if m.Refused {
			e.logf("grants", "%s -> %s grant refused%s", s.From, s.To, fate)
			return
		}
		for _, g := range m.Grants {
			e.logf("grants", "%s -> %s grant %s round %d for %s%s", s.From, s.To, g.Task, g.Round, m.Holder, fate)
		}
	case node.MsgOutcome:
		for _, o := range m.Outcomes {
			e.logf("outcomes", "%s -> %s outcome %s round %d ok=%v%s", s.From, s.To, o.Task, o.Round, o.OK, fate)
		}
	case node.MsgAck:
		for _, a := range m.Acks {
			e.logf("acks", "%s -> %s ack %s round %d%s", s.From, s.To, a.Task, a.Round, fate)
		}
	case node.MsgStealReq:
		e.logf("steals", "%s -> %s steal want %d%s", s.From, s.To, m.Want, fate)
	case node.MsgRaft:
		e.sentRaft(s, fate)
	}
}

// sentRaft prints Raft messages other than heartbeats (log raft), the
// heartbeats that quiesce a partition and their answers (log quiesce), and
// the other heartbeats (log heartbeats).
func (e *env) sentRaft(s nodetest.Sent, fate string) {
	when := "after persist"
	if s.Early {
		when = "early"
	}
	for _, rm := range s.Msg.Raft {
		switch t := rm.Msg.Type; t {
		case pb.MsgHeartbeat, pb.MsgHeartbeatResp:
			if ctx := rm.Msg.Context; len(ctx) == 8 && binary.LittleEndian.Uint64(ctx) == 0 {
				e.logf("quiesce", "%s -> %s p%d %v quiesce%s", s.From, s.To, rm.Partition, t, fate)
			} else {
				e.logf("heartbeats", "%s -> %s p%d %v%s", s.From, s.To, rm.Partition, t, fate)
			}
		default:
			e.logf("raft", "%s -> %s p%d %v term %d index %d entries %d (%s)%s", s.From, s.To, rm.Partition, t,
				rm.Msg.Term, rm.Msg.Index, len(rm.Msg.Entries), when, fate)
		}
	}
}

// observe prints the changes of leadership, replica sets, abdication and
// refused messages since it last ran.
func (e *env) observe() {
	if e.m == nil {
		return
	}
	for part := range e.m.Partitions {
		s := strings.Join(e.m.Serving(part), ",")
		if s != e.servers[part] {
			e.servers[part] = s
			if s == "" {
				s = "nobody"
			}
			e.logf("leaders", "p%d served by %s", part, s)
		}
		if c := e.conf(part); c != "" && c != e.confs[part] {
			e.confs[part] = c
			e.logf("conf", "p%d %s", part, c)
		}
	}
	for _, p := range e.m.Peers {
		e.observePeer(p)
	}
}

func (e *env) observePeer(p *nodetest.Peer) {
	for part := range e.m.Partitions {
		r, ok := p.Node.Replica(part)
		k := fmt.Sprint(p.ID, "/", part)
		ab := ok && !p.Down && r.Abdicated
		if ab != e.abdicated[k] {
			e.abdicated[k] = ab
			if ab {
				e.logf("leaders", "%s abdicates p%d (term %d)", p.ID, part, r.Term)
			}
		}
	}
	for _, s := range p.Stepped[e.stepped[p.ID]:] {
		e.logf("refusals", "%s refused from %s", p.ID, strings.ReplaceAll(s, "\n", "; "))
	}
	e.stepped[p.ID] = len(p.Stepped)
}

// conf describes partition part's configuration as its server sees it
// ("" without one server).
func (e *env) conf(part int) string {
	srv := e.m.Server(part)
	if srv == "" {
		return ""
	}
	r, _ := e.m.MustPeer(srv).Node.Replica(part)
	return describeConf(r)
}

func describeConf(r node.ReplicaInfo) string {
	s := "voters " + strings.Join(sorted(r.Voters), " ")
	if len(r.Learners) > 0 {
		s += " learners " + strings.Join(sorted(r.Learners), " ")
	}
	if len(r.Outgoing) > 0 {
		s += " outgoing " + strings.Join(sorted(r.Outgoing), " ")
	}
	return s
}

func entries(b *wal.Batch) int {
	n := 0
	for _, u := range b.Updates {
		n += len(u.Entries)
	}
	return n
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// duration parses a command's duration argument.
func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: %w", s, err)
	}
	return d, nil
}
