package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer"
	"github.com/needle-mesh/needle/peer/api"
)

// poisonKillsWorkers: one task of a group kills every worker process that
// runs it. Two worker processes (second and third peer, 4 tasks at a
// time) are restarted under a new id whenever one dies, as a supervisor
// would. The poison task fails for good once --worker-crash-limit workers
// died running it alone, the others succeed at their first attempt, and
// it takes at most two deaths more than the limit (the first two, before
// it is run alone, may have run it beside others).
func poisonKillsWorkers(t *testing.T, c *api.Client, addrs []string) {
	const handler, n, poison = "e2e.poison", 12, 5
	type slot struct {
		addr, name string
		gen        int
		p          *workerProc
	}
	slots := []*slot{{addr: addrs[1], name: "pa"}, {addr: addrs[2], name: "pb"}}
	start := func(s *slot) {
		s.gen++
		s.p = startWorkerProc(t, s.addr, fmt.Sprintf("%s-%d", s.name, s.gen), handler, false)
	}
	for _, s := range slots {
		start(s)
	}
	waitWorkers(t, addrs[0], "pa-1", "pb-1")
	res := submitParallel(t, c, "worker-poison", n, func(i int) string {
		return fmt.Sprintf(`{"handler":%q,"payload":{"ms":300,"i":%d,"crash":%v},"retry":{"max_attempts":3}}`, handler, i, i == poison)
	})
	deaths := 0
	var g *api.Group
	deadline := time.After(90 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for g == nil || g.State == "RUNNING" {
		select {
		case <-deadline:
			t.Fatalf("group %+v not finished after 90 s and %d worker deaths", g, deaths)
		case <-tick.C:
		}
		for _, s := range slots {
			select {
			case <-s.p.exited:
				deaths++
				start(s)
			default:
			}
		}
		g, _ = c.GetGroup(t.Context(), res.Group, 0)
	}
	t.Logf("poison task: %d worker processes died before it failed (--worker-crash-limit %d)", deaths, peer.DefaultWorkerCrashLimit)
	for i, tk := range g.Tasks {
		switch {
		case i == poison && (tk.State != "FAILED" || tk.Error == nil || !strings.Contains(*tk.Error, "killed its workers")):
			t.Errorf("poison task %s = %s %v; want FAILED, having killed its workers", tk.ID, tk.State, tk.Error)
		case i != poison && (tk.State != "SUCCEEDED" || tk.Attempt != 1):
			t.Errorf("task %s = %s after %d attempts; want SUCCEEDED after 1", tk.ID, tk.State, tk.Attempt)
		}
	}
	if deaths < peer.DefaultWorkerCrashLimit || deaths > peer.DefaultWorkerCrashLimit+2 {
		t.Errorf("%d workers died; want %d to %d", deaths, peer.DefaultWorkerCrashLimit, peer.DefaultWorkerCrashLimit+2)
	}
}
