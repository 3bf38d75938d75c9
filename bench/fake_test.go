package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// fakeNet starts in-process fake peers that implement just enough of
// docs/api.md for the workloads. Peers started for one cluster (index 0 starts a
// new one) share one fakeMesh: any peer answers for any id, and a shared
// ready queue stands in for ownership and stealing.
type fakeNet struct {
	// corrupt, when set, makes a task's result wrong.
	corrupt func(payload json.RawMessage) bool
	// lose, when set, makes a task fail instead of running.
	lose func(payload json.RawMessage) bool

	mu     sync.Mutex
	meshes []*fakeMesh
	args   [][]string // every started peer's command line, in order
}

// start is a StartFunc.
func (n *fakeNet) start(_ context.Context, spec PeerSpec) (Process, error) {
	n.mu.Lock()
	n.args = append(n.args, spec.Args)
	if spec.Index == 0 {
		n.meshes = append(n.meshes, newFakeMesh(n.corrupt, n.lose))
	}
	m := n.meshes[len(n.meshes)-1]
	n.mu.Unlock()
	l, err := net.Listen("tcp", spec.HTTPAddr)
	if err != nil {
		return nil, err
	}
	return m.addPeer(spec, l), nil
}

// peers returns every fake peer started so far, by mesh and index.
func (n *fakeNet) peers() []*fakePeer {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ps []*fakePeer
	for _, m := range n.meshes {
		m.mu.Lock()
		ps = append(ps, slices.SortedFunc(slices.Values(m.peers), func(a, b *fakePeer) int {
			return a.spec.Index - b.spec.Index
		})...)
		m.mu.Unlock()
	}
	return ps
}

// fakeTask is a task of the fake mesh.
type fakeTask struct {
	id, group, handler string
	payload, result    json.RawMessage
	state, peer        string
	attempt, round     int
	errMsg             string
	created, started   time.Time
	finished           time.Time
}

// fakeGroup is a group of the fake mesh.
type fakeGroup struct {
	id, mode string
	tasks    []*fakeTask
}

// fakeMesh is the shared state of one fake cluster.
type fakeMesh struct {
	corrupt, lose func(json.RawMessage) bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	tasks   map[string]*fakeTask
	groups  map[string]*fakeGroup
	ready   []*fakeTask
	peers   []*fakePeer
	// forgets counts POST /v1/peers/{id}/forget calls by the id forgotten.
	forgets map[string]int
}

func newFakeMesh(corrupt, lose func(json.RawMessage) bool) *fakeMesh {
	return &fakeMesh{corrupt: corrupt, lose: lose, changed: make(chan struct{}),
		tasks: map[string]*fakeTask{}, groups: map[string]*fakeGroup{}}
}

// notify wakes every waiter; m.mu is held.
func (m *fakeMesh) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// submit creates a group; every task becomes READY at once.
func (m *fakeMesh) submit(mode string, specs []TaskSpec) *fakeGroup {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := &fakeGroup{id: "g" + strconv.Itoa(len(m.groups)+1), mode: mode}
	now := time.Now()
	for i, s := range specs {
		t := &fakeTask{id: g.id + "." + strconv.Itoa(i), group: g.id, handler: s.Handler,
			payload: s.Payload, state: "READY", created: now}
		g.tasks = append(g.tasks, t)
		m.tasks[t.id] = t
		m.ready = append(m.ready, t)
	}
	m.groups[g.id] = g
	m.notify()
	return g
}

// lease takes the next READY task for peer p, blocking until there is one
// or ctx ends. It returns the task and its round.
func (m *fakeMesh) lease(ctx context.Context, p *fakePeer) (*fakeTask, int, bool) {
	for {
		m.mu.Lock()
		if p.dead || ctx.Err() != nil {
			m.mu.Unlock()
			return nil, 0, false
		}
		if len(m.ready) > 0 {
			t := m.ready[0]
			m.ready = m.ready[1:]
			t.state, t.peer, t.started = "RUNNING", p.id, time.Now()
			t.round++
			r := t.round
			m.notify()
			m.mu.Unlock()
			return t, r, true
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, 0, false
		case <-ch:
		}
	}
}

// finish records an outcome, fenced by round and by the holder being alive.
func (m *fakeMesh) finish(p *fakePeer, t *fakeTask, round int, result json.RawMessage, errMsg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.round != round || t.state != "RUNNING" || p.dead {
		return
	}
	t.attempt++
	t.state, t.result, t.finished = "SUCCEEDED", result, time.Now()
	if errMsg != "" {
		t.state, t.result, t.errMsg = "FAILED", nil, errMsg
	}
	m.notify()
}

// kill marks p dead and makes its RUNNING tasks READY again (next round).
func (m *fakeMesh) kill(p *fakePeer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p.dead = true
	for _, g := range m.groups {
		for _, t := range g.tasks {
			if t.state == "RUNNING" && t.peer == p.id {
				t.state = "READY"
				m.ready = append(m.ready, t)
			}
		}
	}
	m.notify()
}

// run executes a task's handler.
func (m *fakeMesh) run(ctx context.Context, t *fakeTask) (json.RawMessage, string) {
	if m.lose != nil && m.lose(t.payload) {
		return nil, "lost by the fake"
	}
	switch t.handler {
	case "echo":
	case "sleep":
		var p struct{ MS int }
		if err := json.Unmarshal(t.payload, &p); err != nil {
			return nil, err.Error()
		}
		timer := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return nil, "killed"
		case <-timer.C:
		}
	default:
		return nil, "unknown handler " + t.handler
	}
	if m.corrupt != nil && m.corrupt(t.payload) {
		return json.RawMessage(`{"wrong":true}`), ""
	}
	return t.payload, ""
}

// fakePeer is one fake needled: an HTTP server and a worker pool.
type fakePeer struct {
	mesh *fakeMesh
	spec PeerSpec
	id   string
	dead bool    // guarded by mesh.mu
	cpu  float64 // CPU seconds /metrics reports, 10 ms more each time; guarded by mesh.mu

	srv    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
	once   sync.Once
}

var _ Process = (*fakePeer)(nil)

// addPeer starts a peer serving on l with spec.Slots workers.
func (m *fakeMesh) addPeer(spec PeerSpec, l net.Listener) *fakePeer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &fakePeer{mesh: m, spec: spec, cancel: cancel, done: make(chan struct{}),
		id: fmt.Sprintf("12D3Fake%d-%p", spec.Index, m)}
	p.srv = &http.Server{Handler: p.routes()}
	m.mu.Lock()
	m.peers = append(m.peers, p)
	m.mu.Unlock()
	for range spec.Slots {
		p.wg.Go(func() { p.work(ctx) })
	}
	p.wg.Go(func() { p.srv.Serve(l) })
	return p
}

// work is one slot: lease, run, report, until the peer dies.
func (p *fakePeer) work(ctx context.Context) {
	for {
		t, round, ok := p.mesh.lease(ctx, p)
		if !ok {
			return
		}
		res, errMsg := p.mesh.run(ctx, t)
		p.mesh.finish(p, t, round, res, errMsg)
	}
}

func (p *fakePeer) Done() <-chan struct{} { return p.done }

func (p *fakePeer) Output() string { return "fake peer " + p.id + "\n" }

func (p *fakePeer) Stop(time.Duration) error { return p.Kill() }

// Kill stops the peer at once; its running tasks go back to READY.
func (p *fakePeer) Kill() error {
	p.once.Do(func() {
		p.mesh.kill(p)
		p.cancel()
		p.srv.Close()
		p.wg.Wait()
		close(p.done)
	})
	return nil
}

// isDead reports whether Kill ran.
func (p *fakePeer) isDead() bool {
	p.mesh.mu.Lock()
	defer p.mesh.mu.Unlock()
	return p.dead
}

var errFakeNotFound = errors.New("not found")
