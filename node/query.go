package node

import (
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Task returns a task's view from the partition's state.
func (n *Node) Task(id shard.TaskID) (shard.TaskView, error) {
	p, err := n.readable(id.Group())
	if err != nil {
		return shard.TaskView{}, err
	}
	v, err := p.shard.Task(id)
	v.Waiting = n.waiting(&v)
	return v, err
}

// TaskEvents returns a task's history.
func (n *Node) TaskEvents(id shard.TaskID) ([]shard.TaskEvent, error) {
	p, err := n.readable(id.Group())
	if err != nil {
		return nil, err
	}
	return p.shard.TaskEvents(id)
}

// AppendTaskEvents appends a task's history to dst (TaskEvents into a
// buffer the caller reuses: the simulator's final sweep reads a million).
func (n *Node) AppendTaskEvents(dst []shard.TaskEvent, id shard.TaskID) ([]shard.TaskEvent, error) {
	p, err := n.readable(id.Group())
	if err != nil {
		return dst, err
	}
	return p.shard.AppendTaskEvents(dst, id)
}

// Group returns a group's view.
func (n *Node) Group(id shard.GroupID) (shard.GroupView, error) {
	p, err := n.readable(id)
	if err != nil {
		return shard.GroupView{}, err
	}
	v, err := p.shard.Group(id)
	for i := range v.Tasks {
		v.Tasks[i].Waiting = n.waiting(&v.Tasks[i])
	}
	return v, err
}

// ReplicaGroup returns a group as this node's replica of its partition
// holds it, serving or not: possibly behind the owner, so not for clients
// (Group is); for diagnostics and the simulator's checker, which reads
// what never changes (a group's tasks and pins). ErrUnavailable when this
// node holds no replica.
func (n *Node) ReplicaGroup(id shard.GroupID) (shard.GroupView, error) {
	p := n.parts[n.PartitionOf(id)]
	if p == nil {
		return shard.GroupView{}, ErrUnavailable
	}
	return p.shard.Group(id)
}

// ReplicaGroupSummary is ReplicaGroup without the tasks (for the
// simulator's checker: a group's counts on this replica).
func (n *Node) ReplicaGroupSummary(id shard.GroupID) (shard.GroupView, error) {
	p := n.parts[n.PartitionOf(id)]
	if p == nil {
		return shard.GroupView{}, ErrUnavailable
	}
	return p.shard.GroupSummary(id)
}

// GroupSummary returns a group's view without its tasks.
func (n *Node) GroupSummary(id shard.GroupID) (shard.GroupView, error) {
	p, err := n.readable(id)
	if err != nil {
		return shard.GroupView{}, err
	}
	return p.shard.GroupSummary(id)
}

// GroupState returns a group's summary state (cheap, for waiters).
func (n *Node) GroupState(id shard.GroupID) (shard.GroupState, error) {
	p, err := n.readable(id)
	if err != nil {
		return 0, err
	}
	return p.shard.GroupState(id)
}

func (n *Node) readable(g shard.GroupID) (*partition, error) {
	if g == "" {
		return nil, shard.ErrNotFound
	}
	p := n.parts[n.PartitionOf(g)]
	if !n.leaseHeld(p) {
		return nil, n.unavailable(n.PartitionOf(g))
	}
	return p, nil
}

// Now returns the node's current time (the last Tick).
func (n *Node) Now() time.Time { return n.now }
