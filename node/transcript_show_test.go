package node_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/shard"
)

// wait steps the mesh until a condition holds (see command).
func (e *env) wait(cmd string, pos []string, kv map[string]string) (string, error) {
	max := 10 * time.Second
	if s, ok := kv["max"]; ok {
		var err error
		if max, err = duration(s); err != nil {
			return "", err
		}
	}
	if cmd == "steal" {
		if len(pos) != 3 || pos[1] != "from" {
			return "", fmt.Errorf("steal thief from victim")
		}
		pos = []string{"grant", pos[2] + "->" + pos[0]}
	}
	cond, err := e.condition(pos, kv)
	if err != nil {
		return "", err
	}
	start := e.m.Now
	if !e.m.RunUntil(max, cond) {
		return fmt.Sprintf("timed out after %v: %s", max, strings.Join(pos, " ")), nil
	}
	return fmt.Sprintf("ok after %v", e.m.Now.Sub(start)), nil
}

func (e *env) condition(pos []string, kv map[string]string) (func() bool, error) {
	if len(pos) < 2 {
		return nil, fmt.Errorf("wait what?")
	}
	switch pos[0] {
	case "served":
		part, err := partition(pos[1])
		return func() bool {
			s := e.m.Server(part)
			return s != "" && (kv["by"] == "" || s == kv["by"]) && s != kv["not"]
		}, err
	case "voters":
		part, err := partition(pos[1])
		want := strings.Join(sorted(pos[2:]), " ")
		return func() bool { return e.conf(part) == "voters "+want }, err
	case "runs":
		return func() bool { return len(e.m.MustPeer(pos[1]).Runs) > 0 }, nil
	case "grant":
		ls, err := links(pos[1])
		if err != nil {
			return nil, err
		}
		l := ls[0]
		before := e.grantsOn[l]
		return func() bool { return e.grantsOn[l] > before }, nil
	case "drained":
		return func() bool { done, _ := e.m.MustPeer(pos[1]).Node.Drained(); return done }, nil
	case "outbox":
		return func() bool { return e.m.MustPeer(pos[1]).Node.OutboxLen() == 0 }, nil
	case "task":
		if len(pos) < 3 {
			return nil, fmt.Errorf("wait task id STATE")
		}
		return func() bool { return e.taskState(shard.TaskID(pos[1])) == pos[2] }, nil
	}
	return nil, fmt.Errorf("unknown condition %q", pos[0])
}

func partition(s string) (int, error) {
	return strconv.Atoi(strings.TrimPrefix(s, "p"))
}

// taskState is a task's state at the server of its partition ("" if
// none serves it).
func (e *env) taskState(id shard.TaskID) string {
	v, ok := e.task(id)
	if !ok {
		return ""
	}
	return v.State.String()
}

func (e *env) task(id shard.TaskID) (shard.TaskView, bool) {
	g, _, _ := id.Split()
	srv := e.m.Server(e.m.PartitionOf(g))
	if srv == "" {
		return shard.TaskView{}, false
	}
	v, err := e.m.MustPeer(srv).Node.Task(id)
	return v, err == nil
}

// showCmd prints a part of the mesh's state.
func (e *env) showCmd(pos []string) (string, error) {
	if len(pos) == 0 {
		return "", fmt.Errorf("show what?")
	}
	var b strings.Builder
	switch pos[0] {
	case "leaders":
		e.showLeaders(&b)
	case "conf":
		for part := range e.m.Partitions {
			c := e.conf(part)
			if c == "" {
				c = "(no server)"
			}
			fmt.Fprintf(&b, "p%d %s\n", part, c)
		}
	case "members":
		for _, mi := range e.m.MustPeer(pos[1]).Node.Members() {
			fmt.Fprintf(&b, "%s %v\n", mi.ID, mi.State)
		}
	case "tasks":
		e.showTasks(&b, shard.GroupID(pos[1]))
	case "outbox":
		for _, p := range e.m.Peers {
			fmt.Fprintf(&b, "%s %d\n", p.ID, p.Node.OutboxLen())
		}
	case "stats":
		s := e.m.MustPeer(pos[1]).Node.Counters()
		fmt.Fprintf(&b, "stale-outcomes %d stale-grants %d granted %d steals-granted %d lease-expiries %d abdications %d\n",
			s.StaleOutcomes, s.StaleGrants, s.TasksGranted, s.StealsGranted, s.LeaseExpiries, s.Abdications)
	case "schedule":
		e.showSchedule(&b, shard.ScheduleID(pos[1]))
	case "quiesced":
		for part := range e.m.Partitions {
			var q []string
			for _, p := range e.m.Peers {
				if r, ok := p.Node.Replica(part); ok && !p.Down && r.Quiesced {
					q = append(q, p.ID)
				}
			}
			fmt.Fprintf(&b, "p%d quiesced on [%s]\n", part, strings.Join(q, " "))
		}
	case "entries":
		e.showEntries(&b, shard.GroupID(pos[1]))
	case "held":
		// The partitions each peer holds, in memory and in its WAL, and
		// how many it left (leave.go).
		for _, p := range e.m.Peers {
			stored, _ := p.Log.Partitions()
			fmt.Fprintf(&b, "%s holds %v wal %v left %d\n", p.ID, p.Node.Held(), stored, p.Node.Counters().Left)
		}
	case "drained":
		done, what := e.m.MustPeer(pos[1]).Node.Drained()
		fmt.Fprintf(&b, "drained=%v%s\n", done, strings.TrimRight(" "+what, " "))
	default:
		return "", fmt.Errorf("show %q?", pos[0])
	}
	return b.String(), nil
}

func (e *env) showLeaders(b *strings.Builder) {
	for part := range e.m.Partitions {
		var ls []string
		for _, p := range e.m.Peers {
			if r, ok := p.Node.Replica(part); ok && !p.Down && r.Serving {
				ls = append(ls, fmt.Sprintf("%s (term %d)", p.ID, r.Term))
			}
		}
		if len(ls) == 0 {
			ls = []string{"nobody"}
		}
		fmt.Fprintf(b, "p%d %s\n", part, strings.Join(ls, ", "))
	}
}

func (e *env) showTasks(b *strings.Builder, g shard.GroupID) {
	srv := e.m.Server(e.m.PartitionOf(g))
	if srv == "" {
		fmt.Fprintf(b, "nobody serves %s\n", g)
		return
	}
	gv, err := e.m.MustPeer(srv).Node.Group(g)
	if err != nil {
		fmt.Fprintf(b, "%s: %v\n", g, err)
		return
	}
	fmt.Fprintf(b, "%s %v (at %s)\n", g, gv.State, srv)
	for _, id := range taskIDs(gv) {
		v, _ := e.m.MustPeer(srv).Node.Task(id)
		fmt.Fprintf(b, "  %s %v round %d holder %s attempts %d\n", v.ID, v.State, v.Round, v.Holder, v.Attempt)
	}
}

func taskIDs(gv shard.GroupView) []shard.TaskID {
	ids := make([]shard.TaskID, 0, len(gv.Tasks))
	for _, t := range gv.Tasks {
		ids = append(ids, t.ID)
	}
	slices.Sort(ids)
	return ids
}

func (e *env) showSchedule(b *strings.Builder, id shard.ScheduleID) {
	srv := e.m.Server(e.m.PartitionOf(shard.GroupID(id)))
	if srv == "" {
		fmt.Fprintf(b, "nobody serves %s\n", id)
		return
	}
	v, err := e.m.MustPeer(srv).Node.Schedule(id)
	if err != nil {
		fmt.Fprintf(b, "%s: %v\n", id, err)
		return
	}
	fmt.Fprintf(b, "%s at %s: %d firings\n", id, srv, len(v.Firings))
	seen := map[time.Time]bool{}
	for _, f := range v.Firings {
		dup := ""
		if seen[f.At] {
			dup = " DUPLICATE TICK"
		}
		seen[f.At] = true
		fmt.Fprintf(b, "  tick %.2fs group %s %v%s\n", f.At.Sub(nodetest.Epoch).Seconds(), f.Group, f.State, dup)
	}
}

// showEntries prints the entries of g's partition, in its server's log,
// with an event of g: index, then each event of g (type, task, round,
// holder).
func (e *env) showEntries(b *strings.Builder, g shard.GroupID) {
	part := e.m.PartitionOf(g)
	srv := e.m.Server(part)
	if srv == "" {
		fmt.Fprintf(b, "nobody serves %s\n", g)
		return
	}
	st, err := e.m.MustPeer(srv).Log.Load(uint32(part))
	if err != nil {
		fmt.Fprintf(b, "%s: %v\n", srv, err)
		return
	}
	for _, ent := range st.Entries {
		if ent.Type != pb.EntryNormal || len(ent.Data) == 0 {
			continue
		}
		bt, err := shard.DecodeBatch(ent.Data)
		if err != nil {
			fmt.Fprintf(b, "index %d: %v\n", ent.Index, err)
			continue
		}
		var evs []string
		for _, ev := range bt.Events {
			switch {
			case ev.Group != g:
			case ev.Task == "":
				evs = append(evs, ev.Type.String())
			case ev.Holder != "":
				evs = append(evs, fmt.Sprintf("%v %s round %d for %s", ev.Type, ev.Task, ev.Round, ev.Holder))
			default:
				evs = append(evs, fmt.Sprintf("%v %s round %d", ev.Type, ev.Task, ev.Round))
			}
		}
		if len(evs) > 0 {
			fmt.Fprintf(b, "%s p%d index %d: %s\n", srv, part, ent.Index, strings.Join(evs, ", "))
		}
	}
}
