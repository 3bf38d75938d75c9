package peer

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRunAbort: a run's abort is a context done when the run is aborted
// or its parent is done, whether Done was asked for before or after, and
// a context made from it (the handler's deadline, runContext) sees both.
func TestRunAbort(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	t.Run("aborted", func(t *testing.T) {
		a := newRunAbort(t.Context())
		if a.Err() != nil || closed(a.Done()) {
			t.Fatal("a new abort is done")
		}
		a.abort()
		if !errors.Is(a.Err(), context.Canceled) || !closed(a.Done()) {
			t.Fatalf("after abort: Err %v, Done closed %v", a.Err(), closed(a.Done()))
		}
		a.abort() // again: no panic on a closed channel
	})
	t.Run("aborted before Done", func(t *testing.T) {
		a := newRunAbort(t.Context())
		a.abort()
		if !closed(a.Done()) {
			t.Fatal("Done of an aborted run is open")
		}
	})
	t.Run("parent done", func(t *testing.T) {
		for _, waitFirst := range []bool{false, true} {
			parent, stop := context.WithCancel(t.Context())
			a := newRunAbort(parent)
			var done <-chan struct{}
			if waitFirst {
				done = a.Done()
			}
			stop()
			if waitFirst {
				<-done // closed by the watch on the parent
			}
			if !errors.Is(a.Err(), context.Canceled) || !closed(a.Done()) {
				t.Fatalf("waitFirst %v: parent stopped: Err %v, Done closed %v", waitFirst, a.Err(), closed(a.Done()))
			}
		}
	})
	t.Run("handler context", func(t *testing.T) {
		a := newRunAbort(t.Context())
		rc, end := withRunDeadline(context.WithValue(a, traceKey{}, "x"), time.Now().Add(time.Hour))
		defer end()
		done := rc.Done()
		a.abort()
		<-done
		if !errors.Is(rc.Err(), context.Canceled) {
			t.Fatalf("handler's Err after the abort: %v", rc.Err())
		}
	})
}

type traceKey struct{}
