package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/needle-mesh/needle/peer/api"
)

func echoWorker(f *fakePeer, concurrency, prefetch int) *Worker {
	return &Worker{Client: f.client(), Concurrency: concurrency, Prefetch: prefetch, Handlers: map[string]HandlerFunc{
		"echo": func(_ context.Context, task Task) (json.RawMessage, error) { return task.Payload, nil }}}
}

// Outcomes that finish while a report is in flight go together in the
// next one: one request for many leases, each reported once.
func TestWorkerBatchesOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(8)
		f.gate = make(chan struct{})
		for i := range 8 {
			f.add("echo", fmt.Sprint(i))
		}
		cancel, wait := runWorker(t, echoWorker(f, 2, 6))
		synctest.Wait() // all 8 ran; the first report waits at the gate
		close(f.gate)
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		// The first report may leave with one outcome or with all of them
		// (goroutine order is not fixed): either way the rest, finished
		// while it waited, go in one more request.
		sum := 0
		for _, n := range f.batches {
			sum += n
		}
		if len(f.batches) < 1 || len(f.batches) > 2 || sum != 8 || f.single != 0 {
			t.Errorf("batches %v, %d single reports; want the 8 outcomes in at most 2 batches", f.batches, f.single)
		}
		for i := range 8 {
			if got, want := f.outcome(i), (api.CompleteRequest{Result: json.RawMessage(fmt.Sprint(i))}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outcome %d = %v; want %v", i, got, want)
			}
			if n := f.reports[fmt.Sprintf("%032x", i+1)]; n != 1 {
				t.Errorf("task %d reported %d times; want once", i, n)
			}
		}
	})
}

// A poll carries no outcomes, also while a report is in flight: the
// outcomes that finish meanwhile wait for the next batch, and the polls
// go on bringing tasks.
func TestWorkerPollCarriesNoOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(3)
		cancel, wait := runWorker(t, echoWorker(f, 1, 0))
		f.add("echo", "0")
		synctest.Wait()
		f.mu.Lock()
		f.gate = make(chan struct{})
		f.mu.Unlock()
		f.add("echo", "1") // its report waits at the gate
		synctest.Wait()
		f.add("echo", "2") // runs meanwhile; its outcome waits for the next batch
		synctest.Wait()
		f.mu.Lock()
		polled := len(f.polls)
		f.mu.Unlock()
		if polled < 3 {
			t.Errorf("%d polls answered while a report waited; want the 3 tasks polled", polled)
		}
		close(f.gate)
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		for _, d := range f.pollDone {
			if len(d) > 0 {
				t.Errorf("a poll carried %+v", d)
			}
		}
		if fmt.Sprint(f.batches) != "[1 1 1]" {
			t.Errorf("batches %v; want tasks 0, 1 and 2 on the batch route", f.batches)
		}
		for i := range 3 {
			if n := f.reports[fmt.Sprintf("%032x", i+1)]; n != 1 {
				t.Errorf("task %d reported %d times; want once", i, n)
			}
		}
	})
}

// A peer without the batch route (404) is sent each outcome on its lease.
func TestWorkerOlderPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(5)
		f.noBatch = true
		for i := range 5 {
			f.add("echo", fmt.Sprint(i))
		}
		cancel, wait := runWorker(t, echoWorker(f, 2, 0))
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if f.single != 5 || len(f.batches) != 0 {
			t.Errorf("%d single reports, batches %v; want 5 single", f.single, f.batches)
		}
		for _, d := range f.pollDone {
			if len(d) != 0 {
				t.Errorf("a poll carried %+v to a peer without batches", d)
			}
		}
	})
}

// A peer from before releases (it refuses "release" in a batch, and has no
// release route) takes the tasks a stopping worker hands back as
// retryable fails, as before.
func TestWorkerReleaseOlderPeer(t *testing.T) {
	for _, noBatch := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f := newFakePeer(3)
			f.noRelease, f.noBatch = true, noBatch
			first := stopWhileOneRuns(t, f, nil)
			for i := range 3 {
				if id := fmt.Sprintf("g.%d", i); id == first {
					continue
				}
				if fb, ok := f.outcome(i).(api.FailRequest); !ok || fb.Permanent || !strings.Contains(fb.Error, "before the task started") {
					t.Errorf("noBatch %v: g.%d = %+v; want a retryable fail", noBatch, i, f.outcome(i))
				}
			}
		})
	}
}

// Outcomes too big for one request together go in several: a peer whose
// --max-body a batch is over answers 413, and the batch goes again in
// halves; one outcome alone over it fails its task for good (it would
// otherwise wait out its timeout), and so does a result over the largest
// a mesh stores.
func TestWorkerBatchesBySize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(8)
		f.maxBody = 3 << 20
		f.gate = make(chan struct{})
		mib := `"` + strings.Repeat("x", 1<<20) + `"`
		for range 6 {
			f.add("echo", mib)
		}
		f.add("echo", `"`+strings.Repeat("y", 4<<20)+`"`)       // over the peer's body limit alone
		f.add("echo", `"`+strings.Repeat("z", maxResult+1)+`"`) // over any mesh's result limit
		cancel, wait := runWorker(t, echoWorker(f, 8, 0))
		synctest.Wait()
		close(f.gate)
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			if got, ok := f.outcome(i).(api.CompleteRequest); !ok || len(got.Result) != len(mib) {
				t.Errorf("outcome %d: %T; want its result", i, f.outcome(i))
			}
		}
		for i, want := range map[int]string{6: "--max-body", 7: "largest a mesh stores"} {
			if fb, ok := f.outcome(i).(api.FailRequest); !ok || !fb.Permanent || !strings.Contains(fb.Error, want) {
				t.Errorf("outcome %d = %.100v; want a permanent fail naming %s", i, f.outcome(i), want)
			}
		}
		sum := 0
		for _, n := range f.batches {
			sum += n
		}
		if sum != 8 || len(f.batches) < 3 {
			t.Errorf("batches taken %v; want the 8 outcomes in several, each under the peer's 3 MiB", f.batches)
		}
	})
}
