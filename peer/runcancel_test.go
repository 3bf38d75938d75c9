package peer

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// A task can have two runs on a peer at once: a newer round superseded one
// whose handler has not returned (a committed lease after a forged
// grant's run of a later round, for one). The end of one, or an abort of
// its round, must not cancel the other: when the cancel functions were
// kept by task, the older run's end canceled the newer run's handler.
func TestRunCancelsAreByRound(t *testing.T) {
	p := &Peer{cancels: map[runKey]*runContext{}, outcomes: map[runKey]trace.Span{}}
	ctx := map[shard.Round]context.Context{}
	for _, r := range []shard.Round{7, 1} {
		a := newRunAbort(t.Context())
		ctx[r] = a
		p.cancels[runKey{"g.0", r}] = a
	}
	p.runEnded(runKey{"g.0", 7})
	if ctx[7].Err() == nil {
		t.Fatal("the ended run's context is not canceled")
	}
	if ctx[1].Err() != nil {
		t.Fatal("the end of round 7's run canceled round 1's")
	}
	p.abort([]node.RunRef{{Task: "g.0", Round: 7}})
	if ctx[1].Err() != nil {
		t.Fatal("an abort of round 7 canceled round 1's run")
	}
	p.abort([]node.RunRef{{Task: "g.0", Round: 1}})
	if ctx[1].Err() == nil {
		t.Fatal("an abort of round 1 left its run going")
	}
}
