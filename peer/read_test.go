package peer

import (
	"context"
	"errors"
	"testing"

	"github.com/needle-mesh/needle/node"
)

// A read whose caller gave up before the loop reached it is taken back:
// the loop skips its f, which would write the variables the caller has
// returned (found by the race detector: a long poll's client went away
// while its read of the task waited in the inbox).
func TestReadGivenUpIsNotRun(t *testing.T) {
	p := &Peer{inbox: make(chan command, 1), closed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	errc := make(chan error, 1)
	go func() { errc <- p.read(ctx, func(*node.Node) error { ran = true; return nil }) }()
	c := <-p.inbox // queued, not yet run by the loop
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("read = %v, want context.Canceled", err)
	}
	c.query(nil)
	if ran {
		t.Fatal("the loop ran a read its caller had given up")
	}
}

// A read the loop runs answers with f's error.
func TestReadAnswers(t *testing.T) {
	p := &Peer{inbox: make(chan command, 1), closed: make(chan struct{})}
	want := errors.New("no such task")
	errc := make(chan error, 1)
	go func() { errc <- p.read(context.Background(), func(*node.Node) error { return want }) }()
	(<-p.inbox).query(nil)
	if err := <-errc; !errors.Is(err, want) {
		t.Fatalf("read = %v, want %v", err, want)
	}
}
