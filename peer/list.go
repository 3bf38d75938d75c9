package peer

import (
	"context"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Lists and counts for the whole mesh (GET /v1/tasks, /v1/groups,
// /v1/stats) have the shape of the audit trail: the asked peer answers for
// the partitions it serves, asks every other live member for theirs, and
// merges. Each partition answers from its list index (shard.ListTasks);
// the answer names the partitions nobody served, so a minority side says
// what it is missing rather than silently returning less.

// missing returns the partitions in 0..total-1 not in served.
func missing(total int, served []int) []int {
	seen := make([]bool, total)
	for _, i := range served {
		if i >= 0 && i < total {
			seen[i] = true
		}
	}
	var out []int
	for i, ok := range seen {
		if !ok {
			out = append(out, i)
		}
	}
	return out
}

// gatherList runs a list query on every live member and merges.
func (p *Peer) gatherList(ctx context.Context, f *shard.Filter, groups bool) (node.ListResult, []int, error) {
	var members []string
	var out node.ListResult
	var total int
	err := p.read(ctx, func(n *node.Node) error {
		out, members, total = n.List(f, groups), liveOthers(n), n.Partitions()
		return nil
	})
	if err != nil {
		return node.ListResult{}, nil, err
	}
	askAll(ctx, p, members, &listReq{Filter: f, Groups: groups}, func(a *listAns) {
		if a.List != nil {
			out.Merge(a.List, f.Limit)
		}
	})
	return out, missing(total, out.Parts), nil
}

func (b backend) ListTasks(ctx context.Context, f *shard.Filter) (api.TaskPage, error) {
	r, miss, err := b.p.gatherList(ctx, f, false)
	if err != nil {
		return api.TaskPage{}, mapErr(err)
	}
	return api.TaskPage{Tasks: r.Tasks, Keys: r.Keys, Missing: miss}, nil
}

func (b backend) ListGroups(ctx context.Context, f *shard.Filter) (api.GroupPage, error) {
	r, miss, err := b.p.gatherList(ctx, f, true)
	if err != nil {
		return api.GroupPage{}, mapErr(err)
	}
	return api.GroupPage{Groups: r.Groups, Keys: r.Keys, Missing: miss}, nil
}

func (b backend) Stats(ctx context.Context) (api.StatsPage, error) {
	var members []string
	var out node.StatsResult
	var total int
	var page api.StatsPage
	err := b.p.read(ctx, func(n *node.Node) error {
		out, members, total, page.Now = n.HandlerStats(), liveOthers(n), n.Partitions(), n.Now()
		return nil
	})
	if err != nil {
		return api.StatsPage{}, mapErr(err)
	}
	askAll(ctx, b.p, members, &statsReq{}, func(a *statsAns) {
		if a.Stats != nil {
			out.Merge(a.Stats)
		}
	})
	page.Handlers, page.Missing = out.Handlers, missing(total, out.Parts)
	// The handlers whose READY tasks no live worker may run, in this
	// peer's view of the mesh's workers (a misspelt handler name, or its
	// workers all down).
	err = b.p.read(ctx, func(n *node.Node) error {
		for h, hs := range page.Handlers {
			if hs.Counts[shard.Ready] == 0 {
				continue
			}
			if w := n.HandlerWaiting(h); w != "" {
				if page.Waiting == nil {
					page.Waiting = map[string]string{}
				}
				page.Waiting[h] = w
			}
		}
		return nil
	})
	if err != nil {
		return api.StatsPage{}, mapErr(err)
	}
	return page, nil
}
