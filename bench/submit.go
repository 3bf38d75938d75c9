package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// submitters is the number of concurrent group submitters.
const submitters = 4

// waiters is the number of concurrent group waiters.
const waiters = 8

// longPoll is the wait of one GET ...?wait= request.
const longPoll = 10 * time.Second

// batch is one group to submit.
type batch struct {
	peer     int               // index of the peer to submit to
	spec     GroupSpec         // the tasks, named
	payloads []json.RawMessage // payloads[i] of spec.Tasks[i]
}

// submitted is one acknowledged group.
type submitted struct {
	id   string
	want map[string]json.RawMessage // task id -> payload
}

// submitAll posts every batch with a few concurrent submitters. It returns
// the acknowledged groups in batch order, or the first error.
func submitAll(ctx context.Context, cl *Cluster, batches []batch) ([]submitted, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := make([]submitted, len(batches))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(submitters, len(batches)) {
		wg.Go(func() {
			for i := range next {
				s, err := submitBatch(ctx, cl, batches[i])
				if err != nil {
					cancel(err)
					return
				}
				out[i] = s
			}
		})
	}
	for i := range batches {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// submitRetries bounds the submissions of one group refused with 503 (no
// owner reachable yet: an election on a loaded machine), and
// submitRetryGap is the pause before each.
const (
	submitRetries  = 20
	submitRetryGap = 250 * time.Millisecond
)

// submitBatch posts one group and maps its task ids to payloads. A 503
// did nothing (docs/api.md): the group is sent again, a few times.
func submitBatch(ctx context.Context, cl *Cluster, b batch) (submitted, error) {
	s, err := cl.Client(b.peer).SubmitGroup(ctx, b.spec)
	for try := 0; try < submitRetries && unavailable(err); try++ {
		select {
		case <-ctx.Done():
			return submitted{}, ctx.Err()
		case <-time.After(submitRetryGap):
		}
		s, err = cl.Client(b.peer).SubmitGroup(ctx, b.spec)
	}
	if err != nil {
		return submitted{}, fmt.Errorf("bench: submit group to peer %d: %w", b.peer, err)
	}
	want := make(map[string]json.RawMessage, len(b.spec.Tasks))
	for i, t := range b.spec.Tasks {
		id, ok := s.Tasks[t.Name]
		if !ok {
			return submitted{}, fmt.Errorf("bench: submit group to peer %d: answer lacks task %q", b.peer, t.Name)
		}
		want[id] = b.payloads[i]
	}
	return submitted{id: s.Group, want: want}, nil
}

// waited is the last view of one group.
type waited struct {
	g      Group
	seenAt time.Time // when it was seen terminal (zero if never)
	err    error     // last error, when it was never seen terminal
}

// waitGroups long-polls every group until it is terminal or ctx ends,
// asking the peers in turn (a failed request moves on to the next peer).
// It never fails: a group not seen terminal keeps its last view and error.
func waitGroups(ctx context.Context, cl *Cluster, subs []submitted, peers []int) []waited {
	out := make([]waited, len(subs))
	next := make(chan int, len(subs))
	for i := range subs {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for w := range min(waiters, len(subs)) {
		wg.Go(func() {
			for i := range next {
				out[i] = waitGroup(ctx, cl, subs[i].id, peers, w+i)
			}
		})
	}
	wg.Wait()
	return out
}

// waitGroup long-polls one group, starting at peers[turn%len(peers)].
func waitGroup(ctx context.Context, cl *Cluster, id string, peers []int, turn int) waited {
	res := waited{g: Group{ID: id}}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for ctx.Err() == nil {
		g, err := cl.Client(peers[turn%len(peers)]).Group(ctx, id, longPoll)
		switch {
		case err == nil && terminal(g.State):
			res.g, res.err, res.seenAt = g, nil, time.Now()
			return res
		case err == nil:
			res.g, res.err = g, nil
		case ctx.Err() == nil:
			res.err = err
			turn++ // try the next peer
		}
		select { // do not spin on a peer that answers at once
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	if res.err == nil {
		res.err = fmt.Errorf("group %s not terminal (state %q): %w", id, res.g.State, ctx.Err())
	}
	return res
}

// lastDone returns the latest finished_at of the groups' tasks; a group
// without one counts when it was seen terminal.
func lastDone(ws []waited) time.Time {
	var last time.Time
	for _, w := range ws {
		var t time.Time
		for _, task := range w.g.Tasks {
			if task.FinishedAt.After(t) {
				t = task.FinishedAt.Time
			}
		}
		if t.IsZero() {
			t = w.seenAt
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}

// unavailable reports whether err is a 503 answer.
func unavailable(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusServiceUnavailable
}
