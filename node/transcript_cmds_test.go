package node_test

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/shard"
)

// The transcript commands. Peers are n1, n2, ...; partitions p0, p1, ...;
// links from->to (one way) or a<->b (both); durations as Go writes them.
//
//	peers n=3 parts=2          a mesh of n peers (n1 founds it)
//	add n4                     a new peer joins
//	log +raft -conf            show or hide event kinds (leaders conf runs
//	                           grants outcomes acks states refusals steals
//	                           raft duties quiesce heartbeats)
//	run 5s                     step the clock in 10 ms steps
//	tick 5s                    one step of 5 s (a process that slept)
//	stabilize                  deliver what is in flight, clock stopped
//	wait served p0 [by=n2|not=n2] [max=10s]    step until it holds
//	wait voters p0 n1 n2 n3 | wait runs n2 | wait grant n1->n2
//	wait drained n1 | wait outbox n2 empty | wait task g.0 SUCCEEDED
//	steal n2 from n1 [max=5s]  step until n1 grants n2 a task
//	cut n1->n2 | cut n1<->n2 | heal [n1->n2]
//	ask n2 n1 want=2 running=2 [slots=2]    n2 sends n1 a steal request
//	                           with that load (its runs as they stand are not looked at)
//	hold n1->n2 [grant|outcome|ack|raft|steal] | release n1->n2 | drop-held n1->n2
//	crash n2 [lose-unsynced|after-early] | restart n2 | drain n1
//	forget n4 [at n1]          every live peer forgets n4, or n1 alone
//	hold-runs n2 [off]         n2's handlers wait for report
//	report n2 g.0 ok|fail      n2's handler of g.0 finishes
//	report-late n2 g.0 round=1 ok    an outcome of a round n2 does not run
//	submit g1 [part=0] [tasks=2] [mode=chain] [pin=n2] [timeout=2s] [handler=resize]
//	workers n2 resize=2        n2's workers wait for 2 tasks of resize (every
//	                           handler but echo is external); resize=0: none
//	schedule s1 every=1s       a schedule of one echo task per tick
//	show leaders|conf|members n1|tasks g1|outbox|stats n2|schedule s1|drained n1|quiesced
//	show entries g1            the entries of g1's partition (at its server) that name g1
func (e *env) command(d *datadriven.TestData) (string, error) {
	pos, kv := args(d)
	if d.Cmd != "peers" && e.m == nil {
		return "", errors.New("no mesh yet: start with peers")
	}
	switch d.Cmd {
	case "peers":
		n, err1 := strconv.Atoi(kv["n"])
		parts, err2 := strconv.Atoi(kv["parts"])
		if err := errors.Join(err1, err2); err != nil {
			return "", err
		}
		e.start(n, parts)
		return "", nil
	case "add":
		e.m.AddPeer(pos[0])
		return "", nil
	case "log":
		return "", e.setLog(pos)
	case "run", "tick":
		dur, err := duration(pos[0])
		switch {
		case err != nil:
		case d.Cmd == "run":
			e.m.Run(dur)
		default:
			e.m.Step(dur)
		}
		return "", err
	case "stabilize":
		if !e.m.Stabilize() {
			return "still messages in flight", nil
		}
		return "", nil
	case "wait", "steal":
		return e.wait(d.Cmd, pos, kv)
	case "ask":
		return "", e.ask(pos, kv)
	case "cut", "heal", "hold", "release", "drop-held":
		return e.network(d.Cmd, pos)
	case "crash", "restart", "forget", "drain", "hold-runs":
		return e.peerCmd(d.Cmd, pos)
	case "report", "report-late":
		return e.report(d.Cmd, pos, kv)
	case "submit":
		return e.submit(pos, kv)
	case "workers":
		return "", e.workers(pos, kv)
	case "schedule":
		return e.schedule(pos, kv)
	case "show":
		return e.showCmd(pos)
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// args splits a command's arguments into positional ones and key=value.
func args(d *datadriven.TestData) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			pos = append(pos, a.Key)
		} else {
			kv[a.Key] = strings.Join(a.Vals, ",")
		}
	}
	return pos, kv
}

func (e *env) setLog(kinds []string) error {
	for _, k := range kinds {
		switch {
		case strings.HasPrefix(k, "+"):
			e.show[k[1:]] = true
		case strings.HasPrefix(k, "-"):
			delete(e.show, k[1:])
		default:
			return fmt.Errorf("log %q: want +kind or -kind", k)
		}
	}
	return nil
}

// links parses n1->n2 (one link) or n1<->n2 (both directions).
func links(s string) ([]nodetest.Link, error) {
	if a, b, ok := strings.Cut(s, "<->"); ok {
		return []nodetest.Link{{From: a, To: b}, {From: b, To: a}}, nil
	}
	if a, b, ok := strings.Cut(s, "->"); ok {
		return []nodetest.Link{{From: a, To: b}}, nil
	}
	return nil, fmt.Errorf("bad link %q: want a->b or a<->b", s)
}

var msgTypes = map[string]node.MsgType{"raft": node.MsgRaft, "outcome": node.MsgOutcome, "ack": node.MsgAck,
	"steal": node.MsgStealReq, "grant": node.MsgGrant, "heartbeat": node.MsgHeartbeat}

func (e *env) network(cmd string, pos []string) (string, error) {
	if cmd == "heal" && len(pos) == 0 {
		e.m.Heal()
		return "", nil
	}
	ls, err := links(pos[0])
	if err != nil {
		return "", err
	}
	var out []string
	for _, l := range ls {
		switch cmd {
		case "cut", "heal":
			e.m.Cut(l.From, l.To, cmd == "cut")
		case "hold":
			var t node.MsgType
			if len(pos) > 1 {
				if t = msgTypes[pos[1]]; t == 0 {
					return "", fmt.Errorf("unknown message type %q", pos[1])
				}
			}
			e.m.Hold(l.From, l.To, t)
		case "release":
			out = append(out, fmt.Sprintf("%d released %s->%s", e.m.Release(l.From, l.To), l.From, l.To))
		case "drop-held":
			out = append(out, fmt.Sprintf("%d dropped %s->%s", e.m.DropHeld(l.From, l.To), l.From, l.To))
		}
	}
	return strings.Join(out, "\n"), nil
}

// ask sends a steal request from pos[0] to pos[1] with the load kv gives.
func (e *env) ask(pos []string, kv map[string]string) error {
	if len(pos) != 2 {
		return errors.New("ask: want a thief and a victim")
	}
	thief := e.m.MustPeer(pos[0])
	want, err1 := strconv.Atoi(kv["want"])
	running, err2 := strconv.Atoi(kv["running"])
	slots, err3 := strconv.Atoi(cmp.Or(kv["slots"], "2"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	e.m.Send(pos[0], node.Envelope{To: pos[1], Msg: node.Message{Type: node.MsgStealReq, From: pos[0], Want: want,
		Load: node.Load{Running: running, Slots: slots}, Holder: thief.Node.Holder()}})
	return nil
}

func (e *env) peerCmd(cmd string, pos []string) (string, error) {
	if len(pos) == 0 {
		return "", fmt.Errorf("%s: which peer?", cmd)
	}
	id := pos[0]
	switch cmd {
	case "crash":
		if len(pos) > 1 && pos[1] == "after-early" {
			e.m.MustPeer(id).CrashAfterEarly = true
			return fmt.Sprintf("%s crashes after its next early sends, before their persist", id), nil
		}
		e.m.Crash(id, len(pos) > 1 && pos[1] == "lose-unsynced")
		return fmt.Sprintf("%s down", id), nil
	case "restart":
		e.m.Restart(id)
		return fmt.Sprintf("%s up as %s", id, e.m.MustPeer(id).Node.Holder()), nil
	case "forget":
		if len(pos) == 3 && pos[1] == "at" {
			p := e.m.MustPeer(pos[2]) // one peer asked (POST /v1/peers/{id}/forget)
			p.Node.Forget(id)
			p.Drive()
			break
		}
		e.m.Forget(id)
	case "drain":
		p := e.m.MustPeer(id)
		p.Node.Drain()
		p.Drive()
	case "hold-runs":
		e.m.MustPeer(id).HoldRuns = len(pos) < 2 || pos[1] != "off"
	}
	return "", nil
}

func (e *env) report(cmd string, pos []string, kv map[string]string) (string, error) {
	if len(pos) < 3 {
		return "", fmt.Errorf("%s peer task ok|fail", cmd)
	}
	id, task, ok := pos[0], shard.TaskID(pos[1]), pos[2] == "ok"
	var err error
	if cmd == "report" {
		err = e.m.Report(id, task, ok)
	} else {
		round, perr := strconv.Atoi(kv["round"])
		if perr != nil {
			return "", perr
		}
		err = e.m.ReportAs(id, task, shard.Round(round), ok)
	}
	if err != nil {
		return fmt.Sprintf("%s refused: %v", id, err), nil
	}
	return fmt.Sprintf("%s took the outcome", id), nil
}

func (e *env) submit(pos []string, kv map[string]string) (string, error) {
	var g shard.GroupID
	if len(pos) > 0 {
		g = shard.GroupID(pos[0])
	}
	if p, ok := kv["part"]; ok {
		part, err := strconv.Atoi(p)
		if err != nil {
			return "", err
		}
		g = e.m.GroupIn(string(g), part)
	}
	n := 1
	if s, ok := kv["tasks"]; ok {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			return "", err
		}
	}
	spec := shard.GroupSpec{ID: g, Mode: shard.ModeParallel}
	if kv["mode"] == "chain" {
		spec.Mode = shard.ModeDAG // each task depends on the one before
	}
	for i := range n {
		t := shard.TaskSpec{Name: fmt.Sprint(i), Handler: cmp.Or(kv["handler"], "echo"), Payload: []byte(fmt.Sprint(i)), Pin: kv["pin"]}
		if spec.Mode == shard.ModeDAG && i > 0 {
			t.Deps = []string{fmt.Sprint(i - 1)}
		}
		if s, ok := kv["timeout"]; ok {
			d, err := duration(s)
			if err != nil {
				return "", err
			}
			t.Timeout = d
		}
		spec.Tasks = append(spec.Tasks, t)
	}
	r, ok := e.submitAt(spec, kv)
	switch {
	case !ok:
		return fmt.Sprintf("%s: no reply", g), nil
	case r.Err != nil:
		return fmt.Sprintf("%s: %v", g, r.Err), nil
	}
	return fmt.Sprintf("%s (p%d) created=%v tasks %v", g, e.m.PartitionOf(g), r.Submit.Created, r.Submit.Tasks), nil
}

// submitAt submits spec to the peer serving its partition, or with at=nX
// to that peer whatever it is, waiting wait= (default 3s) for the reply.
func (e *env) submitAt(spec shard.GroupSpec, kv map[string]string) (node.Reply, bool) {
	at, ok := kv["at"]
	if !ok {
		return e.m.Submit(spec)
	}
	wait := 3 * time.Second
	if s, ok := kv["wait"]; ok {
		if d, err := duration(s); err == nil {
			wait = d
		}
	}
	return e.m.Do(at, wait, func(n *node.Node, req uint64) { n.Submit(req, &spec) })
}

func (e *env) schedule(pos []string, kv map[string]string) (string, error) {
	every, err := duration(kv["every"])
	if err != nil {
		return "", err
	}
	id := shard.ScheduleID(pos[0])
	part := e.m.PartitionOf(shard.GroupID(id))
	srv := e.m.Server(part)
	if srv == "" {
		return fmt.Sprintf("nobody serves p%d", part), nil
	}
	spec := shard.ScheduleSpec{ID: id, Every: every, Overlap: shard.OverlapAllow, Misfire: shard.MisfireOnce, Group: shard.GroupSpec{Mode: shard.ModeParallel,
		Tasks: []shard.TaskSpec{{Handler: "echo", Payload: []byte(`"tick"`)}}}}
	r, ok := e.m.Do(srv, 3*time.Second, func(n *node.Node, req uint64) { n.SetSchedule(req, &spec, "transcript") })
	switch {
	case !ok:
		return "no reply", nil
	case r.Err != nil:
		return r.Err.Error(), nil
	}
	return fmt.Sprintf("schedule %s on p%d (served by %s)", id, part, srv), nil
}

// workers sets what a peer's workers wait for (Node.SetDemand): one
// demand per handler=want, sorted by handler, each served by worker w-<handler>.
func (e *env) workers(pos []string, kv map[string]string) error {
	if len(pos) == 0 {
		return errors.New("workers: which peer?")
	}
	var ds []node.Demand
	for _, h := range slices.Sorted(maps.Keys(kv)) {
		want, err := strconv.Atoi(kv[h])
		if err != nil {
			return fmt.Errorf("workers %s=%s: %w", h, kv[h], err)
		}
		ds = append(ds, node.Demand{Handler: h, Want: want, Workers: []string{"w-" + h}})
	}
	p := e.m.MustPeer(pos[0])
	p.Node.SetDemand(ds)
	p.Drive()
	return nil
}
