package peer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// deathTTL is the --worker-ttl of these tests: short, as each death
// waits for it, but long enough that a test's own pauses on a loaded
// machine do not make its live workers dead.
const deathTTL = time.Second

// complete reports a lease's result and fails the test unless it is taken.
func complete(t *testing.T, c *api.Client, lease string) {
	t.Helper()
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/complete", `{"result": "ok"}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}
}

// A task whose handler kills every worker that runs it fails for good
// once --worker-crash-limit workers in a row died running it alone: it is
// not handed to the next worker without end.
func TestWorkerCrashLimitFailsTheTask(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: deathTTL})
	id := submitTask(t, c, `{"handler": "crash", "payload": 1, "retry": {"max_attempts": 5}}`)
	for i := 1; i <= DefaultWorkerCrashLimit; i++ {
		w := "w" + itoa(i)
		got := poll(t, c, w, `"crash"`, 1, "20s")
		if len(got) != 1 || got[0].ID != id || got[0].Round != uint64(i) {
			t.Fatalf("poll of %s = %+v; want %s in round %d", w, got, id, i)
		}
		// w dies: it never polls, heartbeats nor reports again.
	}
	v, err := c.GetTask(t.Context(), id, 20*time.Second)
	if err != nil || v.State != "FAILED" || v.Error == nil || v.Round != DefaultWorkerCrashLimit || v.Attempt != 1 {
		t.Fatalf("task = %+v, %v; want FAILED in round %d after one attempt", v, err, DefaultWorkerCrashLimit)
	}
	if !strings.Contains(*v.Error, "killed its workers") || !strings.Contains(*v.Error, "3 workers died running it alone (and 0 beside other tasks), the last w3") {
		t.Errorf("error = %q; want it to say the task killed 3 workers, the last w3", *v.Error)
	}
	// It runs no more, though it had attempts left.
	if got := poll(t, c, "w4", `"crash"`, 1, "500ms"); len(got) != 0 {
		t.Errorf("poll after the failure = %+v; want nothing", got)
	}
	status, data := wcall(t, c, "GET", "/metrics", "")
	for _, want := range []string{`needle_worker_deaths_total{held="one"} 3`, "needle_worker_crash_limit_total 1"} {
		if status != 200 || !strings.Contains(string(data), want+"\n") {
			t.Errorf("metrics = %d, without %q", status, want)
		}
	}
	// Its events name each worker that died.
	status, data = wcall(t, c, "GET", "/v1/tasks/"+id+"/events", "")
	for _, w := range []string{"w1", "w2"} {
		if status != 200 || !strings.Contains(string(data), "worker "+w+" on peer") || !strings.Contains(string(data), "died running it alone") {
			t.Errorf("events = %d %s; want an expired event naming %s, dead running it alone", status, data, w)
		}
	}
	// A retry by hand starts it with a clean record: it is handed out
	// beside another task again.
	if status, data := wcall(t, c, "POST", "/v1/tasks/"+id+"/retry", ""); status != 200 {
		t.Fatalf("retry = %d %s", status, data)
	}
	other := submitTask(t, c, `{"handler": "crash", "payload": 2}`)
	var got []api.WorkerTask
	waitUntil(t, func() bool {
		got = append(got, poll(t, c, "w5", `"crash"`, 2-len(got), "100ms")...)
		return len(got) == 2
	})
	if ids := []string{got[0].ID, got[1].ID}; !slices.Contains(ids, id) || !slices.Contains(ids, other) {
		t.Errorf("poll after the retry = %v; want %s and %s in one worker", ids, id, other)
	}
}

// The tasks a dead worker held run again at once, as any other: one death
// is no evidence. Tasks that two workers died running run again one to a
// worker, each alone: the one that killed them kills its next workers
// alone and fails, and the others, whose workers live, succeed after one
// attempt each.
func TestWorkerDeadWorkersTasksRunIsolated(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: deathTTL})
	poison := submitTask(t, c, `{"handler": "crash", "payload": "poison"}`)
	ids := []string{submitTask(t, c, `{"handler": "crash", "payload": "a"}`), poison, submitTask(t, c, `{"handler": "crash", "payload": "b"}`)}
	// w0 dies holding all three (none is known to be the one), and so
	// does w1, which takes all three again.
	for _, w := range []string{"w0", "w1"} {
		var held []string
		waitUntil(t, func() bool {
			for _, tk := range poll(t, c, w, `"crash"`, 3-len(held), "100ms") {
				held = append(held, tk.ID)
			}
			return len(held) == 3
		})
	}
	deaths, worker, done := 0, 2, 0
	for deaths < DefaultWorkerCrashLimit || done < 2 {
		w := "w" + itoa(worker)
		got := poll(t, c, w, `"crash"`, 3, "20s")
		if len(got) != 1 || !slices.Contains(ids, got[0].ID) {
			t.Fatalf("poll of %s = %+v; want one of %v, alone", w, got, ids)
		}
		if got[0].ID == poison {
			deaths++
			worker++ // w dies
			continue
		}
		// A worker running a suspect takes nothing else meanwhile.
		if more := poll(t, c, w, `"crash"`, 2, "200ms"); len(more) != 0 {
			t.Fatalf("second poll of %s, running %s alone = %+v; want nothing", w, got[0].ID, more)
		}
		complete(t, c, got[0].Lease)
		done++
	}
	for _, id := range ids {
		v, err := c.GetTask(t.Context(), id, 20*time.Second)
		switch {
		case err != nil:
			t.Fatal(err)
		case id == poison && (v.State != "FAILED" || v.Error == nil || !strings.Contains(*v.Error, "killed its workers")):
			t.Errorf("poison task = %s %v; want FAILED, having killed its workers", v.State, v.Error)
		case id != poison && (v.State != "SUCCEEDED" || v.Attempt != 1):
			t.Errorf("task %s = %s after %d attempts; want SUCCEEDED after 1", id, v.State, v.Attempt)
		}
	}
}

// A busy worker that meets a suspect drains for it: it takes no other
// task until its own ended, then gets the suspect alone (on the poll
// already waiting), then other work once the suspect ended.
func TestWorkerDrainsForASuspect(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: deathTTL})
	long := submitTask(t, c, `{"handler": "h", "payload": "long"}`)
	got := poll(t, c, "busy", `"h"`, 2, "10s")
	if len(got) != 1 || got[0].ID != long {
		t.Fatalf("poll of busy = %+v; want %s", got, long)
	}
	longLease := got[0].Lease
	suspect := submitTask(t, c, `{"handler": "h", "payload": "suspect"}`)
	var first []api.WorkerTask
	waitUntil(t, func() bool {
		first = poll(t, c, "dies", `"h"`, 1, "100ms")
		return len(first) == 1
	})
	if first[0].ID != suspect {
		t.Fatalf("poll of dies = %+v; want %s", first, suspect)
	}
	// dies dies, and so does dies2, which takes it next: it comes back to
	// this peer in round 3, for busy's free slot, but busy gets nothing
	// while it holds its own task.
	waitUntil(t, func() bool {
		if status, data := wcall(t, c, "POST", "/v1/leases/"+longLease+"/heartbeat", ""); status != 200 {
			t.Fatalf("heartbeat of busy = %d %s", status, data) // busy lives
		}
		second := poll(t, c, "dies2", `"h"`, 1, "100ms")
		if len(second) > 0 && (second[0].ID != suspect || second[0].Round != 2) {
			t.Fatalf("poll of dies2 = %+v; want %s in round 2", second, suspect)
		}
		return len(second) == 1
	})
	waitUntil(t, func() bool {
		if more := poll(t, c, "busy", `"h"`, 1, "100ms"); len(more) != 0 {
			t.Fatalf("poll of busy, holding %s = %+v; want nothing while it drains", long, more)
		}
		v, err := c.GetTask(t.Context(), suspect, 0)
		return err == nil && v.Round == 3 && v.State == "RUNNING"
	})
	if more := poll(t, c, "busy", `"h"`, 1, "200ms"); len(more) != 0 {
		t.Fatalf("poll of busy, holding %s = %+v; want nothing while it drains", long, more)
	}
	fresh := submitTask(t, c, `{"handler": "h", "payload": "fresh"}`)
	waiting := make(chan []api.WorkerTask, 1)
	go func() { waiting <- poll(t, c, "busy", `"h"`, 2, "20s") }()
	waitUntil(t, func() bool {
		status, data := wcall(t, c, "GET", "/v1/workers", "")
		return status == 200 && strings.Contains(string(data), `"polling":true`)
	})
	complete(t, c, longLease)
	var alone []api.WorkerTask
	select {
	case alone = <-waiting:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting poll of busy got nothing once it drained")
	}
	if len(alone) != 1 || alone[0].ID != suspect || alone[0].Round != 3 {
		t.Fatalf("poll of busy once drained = %+v; want %s alone, round 3", alone, suspect)
	}
	if more := poll(t, c, "busy", `"h"`, 1, "200ms"); len(more) != 0 {
		t.Fatalf("poll of busy, running %s alone = %+v; want nothing", suspect, more)
	}
	complete(t, c, alone[0].Lease)
	var last []api.WorkerTask
	waitUntil(t, func() bool {
		last = poll(t, c, "busy", `"h"`, 2, "100ms")
		return len(last) > 0
	})
	if len(last) != 1 || last[0].ID != fresh {
		t.Fatalf("poll of busy after the suspect = %+v; want %s", last, fresh)
	}
	complete(t, c, last[0].Lease)
	for _, id := range []string{long, suspect, fresh} {
		if v, err := c.GetTask(t.Context(), id, 10*time.Second); err != nil || v.State != "SUCCEEDED" {
			t.Errorf("task %s = %+v, %v; want SUCCEEDED", id, v, err)
		}
	}
}

// With --worker-crash-limit 0 (Config -1) a dead worker's tasks run again
// as before: no isolation, no limit.
func TestWorkerCrashLimitOff(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: deathTTL, WorkerCrashLimit: -1})
	id := submitTask(t, c, `{"handler": "crash", "payload": 1}`)
	other := submitTask(t, c, `{"handler": "crash", "payload": 2}`)
	for i := 1; i <= DefaultWorkerCrashLimit+1; i++ {
		var got []api.WorkerTask
		waitUntil(t, func() bool {
			got = append(got, poll(t, c, "w"+itoa(i), `"crash"`, 2-len(got), "100ms")...)
			return len(got) == 2
		})
		for _, tk := range got {
			if tk.Round != uint64(i) {
				t.Fatalf("poll of w%d = %+v; want both tasks in round %d", i, got, i)
			}
		}
	}
	for _, x := range []string{id, other} {
		if v, err := c.GetTask(t.Context(), x, 0); err != nil || v.State != "RUNNING" {
			t.Errorf("task %s = %+v, %v; want RUNNING still", x, v, err)
		}
	}
}

// The deaths are the task's, not a peer's: they are recorded in its
// partition's log, so workers that die running it alone on three peers,
// one each, fail it as three on one peer do.
func TestWorkerCrashesCountAcrossPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3With(t, func(c *Config) { c.WorkerTTL = deathTTL })
	res := submitRetrying(t, peers[0].c, `{"mode":"parallel","key":"poison","tasks":[{"handler":"crash","payload":1,"retry":{"max_attempts":5}}]}`)
	id := res.Group + ".0"
	for i, p := range []*meshPeer{peers[1], peers[2], peers[0]} {
		w := "w" + itoa(i+1)
		var got []api.WorkerTask
		waitUntil(t, func() bool {
			got = poll(t, p.c, w, `"crash"`, 1, "1s")
			return len(got) > 0
		})
		if len(got) != 1 || got[0].ID != id || got[0].Round != uint64(i+1) {
			t.Fatalf("poll of %s = %+v; want %s in round %d", w, got, id, i+1)
		}
		var deaths shard.Deaths // the poll shows the worker the deaths so far
		if got[0].WorkerDeaths != nil {
			deaths = *got[0].WorkerDeaths
		}
		if deaths != (shard.Deaths{Alone: i}) {
			t.Fatalf("poll of %s: worker_deaths %+v; want %d alone", w, deaths, i)
		}
		if i == 2 {
			// Every peer shows them, in the task and in its group: the
			// owner's view, and the others' forwarded reads.
			for _, p := range peers {
				v, err := p.c.GetTask(t.Context(), id, 0)
				if err != nil || v.WorkerDeaths == nil || *v.WorkerDeaths != (shard.Deaths{Alone: 2}) {
					t.Fatalf("task via %s = %+v, %v; want worker_deaths alone 2", p.p.ID(), v, err)
				}
				g, err := p.c.GetGroup(t.Context(), res.Group, 0)
				if err != nil || len(g.Tasks) != 1 || g.Tasks[0].WorkerDeaths == nil || *g.Tasks[0].WorkerDeaths != (shard.Deaths{Alone: 2}) {
					t.Fatalf("group via %s = %+v, %v; want its task's worker_deaths alone 2", p.p.ID(), g, err)
				}
				// The lists find it by its deaths, from every peer.
				for _, l := range []struct {
					path string
					want bool
				}{
					{"/v1/tasks?worker_deaths=2", true}, {"/v1/tasks?worker_deaths=3", false},
					{"/v1/groups?worker_deaths=1&state=RUNNING", true}, {"/v1/groups?worker_deaths=3", false},
				} {
					status, data := wcall(t, p.c, "GET", l.path, "")
					if status != 200 || strings.Contains(string(data), `"`+res.Group) != l.want {
						t.Fatalf("GET %s via %s = %d %s; want %s listed: %v", l.path, p.p.ID(), status, data, res.Group, l.want)
					}
				}
			}
		}
		// w dies.
	}
	v, err := peers[0].c.GetTask(t.Context(), id, 20*time.Second)
	if err != nil || v.State != "FAILED" || v.Error == nil || !strings.Contains(*v.Error, "3 workers died running it alone (and 0 beside other tasks), the last w3") {
		t.Fatalf("task = %+v, %v; want FAILED, having killed w1, w2 and w3", v, err)
	}
}

// A worker that polls under the same id as another instance restarted:
// the tasks its previous process held run again at once (its death
// recorded with them), not after --worker-ttl or their timeouts; a poll
// naming no instance, or the same one, changes nothing.
func TestWorkerRestartedInstance(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: time.Hour})
	id := submitTask(t, c, `{"handler": "h", "payload": 1}`)
	pollAs := func(instance string, max int, wait string) []api.WorkerTask {
		t.Helper()
		body := `{"worker": "w", "instance": "` + instance + `", "handlers": ["h"], "max": ` + itoa(max) + `, "wait": "` + wait + `"}`
		status, data := wcall(t, c, "POST", "/v1/workers/poll", body)
		if status != 200 {
			t.Fatalf("poll = %d %s", status, data)
		}
		var res api.PollResult
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatal(err)
		}
		return res.Tasks
	}
	first := pollAs("a", 1, "10s")
	if len(first) != 1 || first[0].ID != id {
		t.Fatalf("poll of instance a = %+v; want %s", first, id)
	}
	if got := pollAs("a", 1, "100ms"); len(got) != 0 {
		t.Fatalf("second poll of instance a = %+v; want nothing (it holds the task)", got)
	}
	if got := pollAs("", 1, "100ms"); len(got) != 0 {
		t.Fatalf("poll naming no instance = %+v; want nothing (it holds the task)", got)
	}
	var again []api.WorkerTask
	waitUntil(t, func() bool {
		again = pollAs("b", 2, "1s")
		return len(again) > 0
	})
	if len(again) != 1 || again[0].ID != id || again[0].Round != 2 {
		t.Fatalf("poll of instance b = %+v; want %s in round 2", again, id)
	}
	status, data := wcall(t, c, "POST", "/v1/leases/"+first[0].Lease+"/complete", `{"result": 1}`)
	if status != 409 || errCode(data) != api.CodeLeaseLost {
		t.Errorf("complete of instance a's lease = %d %s; want 409 lease_lost", status, data)
	}
	_, evs := wcall(t, c, "GET", "/v1/tasks/"+id+"/events", "")
	if !strings.Contains(string(evs), "polls again as another instance") {
		t.Errorf("events = %s; want the expiry to say the worker restarted", evs)
	}
	// Instance a polls again: not a restart but a second live process
	// under w's id. It is refused, naming the instance, and instance b's
	// task stays with b (before, each poll buried the other's tasks, a
	// death at every poll, until the crash limit failed them).
	status, data = wcall(t, c, "POST", "/v1/workers/poll", `{"worker": "w", "instance": "a", "handlers": ["h"], "max": 1, "wait": "100ms"}`)
	if status != 409 || errCode(data) != api.CodeConflict || !strings.Contains(string(data), `"field":"instance"`) || !strings.Contains(string(data), "two worker processes") {
		t.Errorf("poll of the retired instance a = %d %s; want 409 conflict naming instance", status, data)
	}
	if v, err := c.GetTask(t.Context(), id, 0); err != nil || v.Round != 2 || v.WorkerDeaths == nil || v.WorkerDeaths.Total() != 1 {
		t.Errorf("task = %+v, %v; want still round 2 with b, one death", v, err)
	}
	complete(t, c, again[0].Lease)
	if v, err := c.GetTask(t.Context(), id, 10*time.Second); err != nil || v.State != "SUCCEEDED" || v.Attempt != 1 {
		t.Errorf("task = %+v, %v; want SUCCEEDED at its first attempt", v, err)
	}
}
