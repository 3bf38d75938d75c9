package peer

import (
	"context"
	"errors"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// waiter is a long-poll (?wait=) parked in the loop until its task or group
// reaches a terminal state. done is buffered: the loop never blocks on it.
type waiter struct {
	ctx   context.Context
	task  shard.TaskID
	group shard.GroupID // set when waiting for a whole group
	done  chan struct{}
	// view is the task's view when the loop released a task's waiter on
	// its terminal state, written before done is closed (nil otherwise:
	// the waiting client reads the task itself).
	view *shard.TaskView
	// moved is set, before done is closed, when the loop let go of the
	// waiter because another peer owns its target now (sweep), or this
	// peer does not serve it now (add): the caller routes the rest of its
	// wait, as for any unavailable answer.
	moved bool
}

// terminal returns the view the loop left when it released w on its
// task's terminal state.
func (w *waiter) terminal() (*shard.TaskView, bool) {
	select {
	case <-w.done:
		return w.view, w.view != nil
	default:
		return nil, false
	}
}

// terminalView is task id's view when the task is terminal, else nil.
func terminalView(n *node.Node, id shard.TaskID) *shard.TaskView {
	v, err := n.Task(id)
	if err != nil || !v.State.Terminal() {
		return nil
	}
	return &v
}

// waiters is loop-owned: no locking.
type waiters struct {
	tasks  map[shard.TaskID][]*waiter
	groups map[shard.GroupID][]*waiter
}

func newWaiters() waiters {
	return waiters{tasks: map[shard.TaskID][]*waiter{}, groups: map[shard.GroupID][]*waiter{}}
}

// add parks w, or releases it at once when its target is already terminal
// or unknown (the caller then reads the current state), or when this peer
// does not serve it now (moved: the caller is told unavailable).
//
// Not served is not unknown: a leader whose lease lapsed (its voters'
// answers late on a loaded machine) or whose leadership is in transfer
// reads nothing for a moment, and the caller's read right after may find
// the lease back and the target running. A group wait of 60 s came back
// RUNNING after 0.15 s that way (cmd/needled TestMeshJoinByName under
// load, as partitions moved to the joiners).
func (ws *waiters) add(n *node.Node, w *waiter) {
	if w.group != "" {
		st, err := n.GroupState(w.group)
		if errors.Is(err, node.ErrUnavailable) {
			w.moved = true
		}
		if err != nil || st.Terminal() {
			close(w.done)
			return
		}
		ws.groups[w.group] = append(ws.groups[w.group], w)
		return
	}
	v, err := n.Task(w.task)
	if errors.Is(err, node.ErrUnavailable) {
		w.moved = true
	}
	if err != nil || v.State.Terminal() {
		if err == nil {
			w.view = &v
		}
		close(w.done)
		return
	}
	ws.tasks[w.task] = append(ws.tasks[w.task], w)
}

// wake releases the waiters of tasks and groups that changed, a task's
// with its view.
func (ws *waiters) wake(n *node.Node, changes []shard.Change) {
	for _, c := range changes {
		if c.Retried {
			continue // runnable again: its waiters wait for the outcome
		}
		if list, ok := ws.tasks[c.Task]; ok {
			v := terminalView(n, c.Task)
			for _, w := range list {
				w.view = v
				close(w.done)
			}
			delete(ws.tasks, c.Task)
		}
		if !c.GroupDone {
			continue
		}
		if list, ok := ws.groups[c.Group]; ok {
			for _, w := range list {
				close(w.done)
			}
			delete(ws.groups, c.Group)
		}
	}
}

// sweep drops waiters whose client went away, and lets go of those whose
// task or group another peer owns now (its partition moved: a peer
// joined, or leadership went elsewhere). A waiter parked here hears of
// the change it waits for only while this peer keeps a replica of the
// partition, and with more peers than replicas it may keep none. Let go,
// the waiting call is told it is unavailable (Peer.wait), and is routed
// again to the new owner with what is left of its wait (backend.Task):
// not a read here, which this peer may still answer (it leads the
// partition until it has handed it over) with a state that is not the
// end of the wait. An owner unknown for the moment (an election) keeps
// them.
func (ws *waiters) sweep(n *node.Node, self string) {
	here := func(g shard.GroupID) bool { o := n.Owner(g); return o == "" || o == self }
	for id, list := range ws.tasks {
		if kept := live(list, here(id.Group())); len(kept) == 0 {
			delete(ws.tasks, id)
		} else {
			ws.tasks[id] = kept
		}
	}
	for id, list := range ws.groups {
		if kept := live(list, here(id)); len(kept) == 0 {
			delete(ws.groups, id)
		} else {
			ws.groups[id] = kept
		}
	}
}

// live returns the waiters of list whose client still waits, and lets go
// of them all when their target's owner is elsewhere.
func live(list []*waiter, here bool) []*waiter {
	kept := list[:0]
	for _, w := range list {
		switch {
		case w.ctx.Err() != nil:
		case !here:
			w.moved = true
			close(w.done)
		default:
			kept = append(kept, w)
		}
	}
	return kept
}
