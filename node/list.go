package node

import (
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// ListResult is one peer's answer to a list query: the items of the
// partitions it serves, newest first, at most the filter's limit, and
// which partitions those are.
type ListResult struct {
	Tasks  []shard.TaskView  `json:"tasks,omitempty"`
	Groups []shard.GroupView `json:"groups,omitempty"`
	Keys   []shard.ListKey   `json:"keys,omitempty"`
	Parts  []int             `json:"parts,omitempty"`
}

// List answers a list query for the partitions this node serves.
func (n *Node) List(f *shard.Filter, groups bool) ListResult {
	f.Limit = min(max(f.Limit, 1), shard.MaxListLimit)
	var out ListResult
	for _, i := range n.held {
		p := n.parts[i]
		if p == nil || !n.leaseHeld(p) {
			continue
		}
		out.Parts = append(out.Parts, i)
		if groups {
			gs, keys := p.shard.ListGroups(f)
			out.Groups, out.Keys = append(out.Groups, gs...), append(out.Keys, keys...)
		} else {
			ts, keys := p.shard.ListTasks(f)
			out.Tasks, out.Keys = append(out.Tasks, ts...), append(out.Keys, keys...)
		}
		out.Trim(f.Limit)
	}
	// A READY task no live peer may run says why, as it does when read
	// alone (Task): in this node's view, which is its owner's. Once per
	// handler and placement: a page of READY tasks is mostly of a few,
	// and each look walks the members' workers.
	var seen map[string]string
	for i := range out.Tasks {
		v := &out.Tasks[i]
		if v.State != shard.Ready {
			continue
		}
		k := v.Handler + "\x00" + v.Pin + "\x00" + strings.Join(v.Require, "\x00")
		w, ok := seen[k]
		if !ok {
			w = n.waiting(v)
			if seen == nil {
				seen = map[string]string{}
			}
			seen[k] = w
		}
		v.Waiting = w
	}
	return out
}

// merge adds o's items to r and keeps the newest limit.
func (r *ListResult) Merge(o *ListResult, limit int) {
	r.Tasks = append(r.Tasks, o.Tasks...)
	r.Groups = append(r.Groups, o.Groups...)
	r.Keys = append(r.Keys, o.Keys...)
	r.Parts = append(r.Parts, o.Parts...)
	r.Trim(limit)
}

// trim sorts the items newest first and keeps the first limit.
func (r *ListResult) Trim(limit int) {
	order := make([]int, len(r.Keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if r.Keys[b].Less(r.Keys[a]) {
			return -1
		}
		return 1
	})
	order = order[:min(len(order), max(limit, 1))]
	keys := make([]shard.ListKey, len(order))
	for i, j := range order {
		keys[i] = r.Keys[j]
	}
	if r.Tasks != nil {
		ts := make([]shard.TaskView, len(order))
		for i, j := range order {
			ts[i] = r.Tasks[j]
		}
		r.Tasks = ts
	}
	if r.Groups != nil {
		gs := make([]shard.GroupView, len(order))
		for i, j := range order {
			gs[i] = r.Groups[j]
		}
		r.Groups = gs
	}
	r.Keys = keys
}

// StatsResult is one peer's task counts per handler, for the partitions
// it serves.
type StatsResult struct {
	Handlers map[string]*shard.HandlerStats `json:"handlers,omitempty"`
	Parts    []int                          `json:"parts,omitempty"`
}

// HandlerStats counts the tasks of the partitions this node serves.
func (n *Node) HandlerStats() StatsResult {
	out := StatsResult{Handlers: map[string]*shard.HandlerStats{}}
	for _, i := range n.held {
		if p := n.parts[i]; p != nil && n.leaseHeld(p) {
			out.Parts = append(out.Parts, i)
			p.shard.AddHandlerStats(out.Handlers)
		}
	}
	return out
}

// OldestReady returns, per handler, when the longest-waiting queued READY
// task of the partitions this node serves became READY (handlers with none
// are absent).
func (n *Node) OldestReady() map[string]time.Time {
	out := map[string]time.Time{}
	for _, i := range n.held {
		if p := n.parts[i]; p != nil && n.leaseHeld(p) {
			p.shard.AddOldestReady(out)
		}
	}
	return out
}

func (r *StatsResult) Merge(o *StatsResult) {
	r.Parts = append(r.Parts, o.Parts...)
	for h, os := range o.Handlers {
		hs := r.Handlers[h]
		if hs == nil {
			hs = &shard.HandlerStats{}
			r.Handlers[h] = hs
		}
		for st, c := range os.Counts {
			hs.Counts[st] += c
		}
		if !os.OldestReady.IsZero() && (hs.OldestReady.IsZero() || os.OldestReady.Before(hs.OldestReady)) {
			hs.OldestReady = os.OldestReady
		}
	}
}
