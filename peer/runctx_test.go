package peer

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A run's context makes no timer until Done is asked for, and behaves as
// context.WithDeadline's either way: its deadline, its parent's
// cancellation and its own end each stop it, with the error that stopped
// it first, and contexts derived from it follow.
func TestRunContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, end := withRunDeadline(context.Background(), time.Now().Add(time.Second))
		if d, ok := ctx.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
			t.Errorf("Deadline = %v, %v", d, ok)
		}
		if ctx.Err() != nil {
			t.Errorf("Err = %v before the deadline", ctx.Err())
		}
		end()
		if ctx.done != nil || ctx.stop != nil {
			t.Error("a run that never asked for Done made a timer")
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("Err = %v after the run's end; want Canceled", ctx.Err())
		}
		select {
		case <-ctx.Done():
		default:
			t.Error("Done of an ended run is open")
		}
	})
	synctest.Test(t, func(t *testing.T) { // the deadline passes while a handler waits
		ctx, end := withRunDeadline(context.Background(), time.Now().Add(time.Second))
		defer end()
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		start := time.Now()
		<-derived.Done()
		if took := time.Since(start); took != time.Second {
			t.Errorf("done after %v; want the deadline, 1s", took)
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(derived.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v, derived %v; want DeadlineExceeded", ctx.Err(), derived.Err())
		}
	})
	synctest.Test(t, func(t *testing.T) { // the parent is canceled (the run aborted)
		parent, abort := context.WithCancel(context.Background())
		ctx, end := withRunDeadline(parent, time.Now().Add(time.Hour))
		defer end()
		done := ctx.Done()
		abort()
		<-done
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("Err = %v after the parent's cancel; want Canceled", ctx.Err())
		}
	})
	synctest.Test(t, func(t *testing.T) { // a handler that only polls Err
		ctx, end := withRunDeadline(context.Background(), time.Now().Add(time.Second))
		defer end()
		time.Sleep(2 * time.Second)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v past the deadline; want DeadlineExceeded", ctx.Err())
		}
		select {
		case <-ctx.Done():
		default:
			t.Error("Done asked for past the deadline is open")
		}
		end()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v after the end; want DeadlineExceeded still", ctx.Err())
		}
	})
	synctest.Test(t, func(t *testing.T) { // a parent's earlier deadline wins
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx, end := withRunDeadline(parent, time.Now().Add(time.Hour))
		defer end()
		if d, _ := ctx.Deadline(); !d.Equal(time.Now().Add(time.Second)) {
			t.Errorf("Deadline = %v; want the parent's", d)
		}
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v; want DeadlineExceeded", ctx.Err())
		}
	})
}
