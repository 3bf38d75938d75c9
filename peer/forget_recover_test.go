package peer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// A 2-peer mesh whose second peer is gone for good: every partition has
// two voters and none commits. POST /v1/peers/{id}/forget?unsafe_recover=true
// (needle forget --unsafe-recover) on the survivor recovers them all from
// its copy; every group acknowledged before is there, new ones commit,
// and the recovered partitions reopen from the survivor's Badger WAL
// after a restart.
func TestForgetUnsafeRecoverRealPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	dir := t.TempDir()
	edit := func(c *Config) { c.DrainTimeout = -1 }
	p1 := startMeshPeerConfig(t, meshPeerConfig(t, dir, edit))
	p2 := startMeshPeerConfig(t, meshPeerConfig(t, t.TempDir(), func(c *Config) { edit(c); c.Join = []string{p1.p.tr.Addrs()[0]} }))
	stats := func(mp *meshPeer) (st node.Stats) {
		_ = mp.p.read(t.Context(), func(n *node.Node) error { st = n.Stats(); return nil })
		return st
	}
	waitFor(t, "2 voters of every partition", 30*time.Second, func() bool {
		return stats(p1).Voter == 32 && stats(p2).Voter == 32 && stats(p2).Leading > 0
	})
	var groups, tasks []string
	for i := range 8 {
		body := fmt.Sprintf(`{"mode":"parallel","key":"recover-%d","tasks":[{"handler":"echo","payload":%d}]}`, i, i)
		res := submitRetrying(t, p1.c, body)
		groups = append(groups, res.Group)
		for _, id := range res.Tasks {
			tasks = append(tasks, id)
		}
	}
	for _, g := range groups {
		if gv, err := getGroupRetrying(t, p1.c, g, 30*time.Second); err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("group %s = %+v, %v", g, gv, err)
		}
	}
	lost := p2.p.ID()
	// A live peer's disk is not lost: force does not make it so (the
	// recovered copies and the live peer would both take writes).
	if status, data := wcall(t, p1.c, "POST", "/v1/peers/"+lost+"/forget?force=true&unsafe_recover=true", ""); status != http.StatusConflict ||
		!strings.Contains(string(data), `"field":"id"`) || !strings.Contains(string(data), "force or not") {
		t.Fatalf("forget of a live peer, force and unsafe_recover = %d %s; want 409 naming id", status, data)
	}
	var forgottenLive bool
	_ = p1.p.read(t.Context(), func(n *node.Node) error { forgottenLive = n.IsForgotten(lost); return nil })
	if forgottenLive {
		t.Fatal("a refused unsafe forget of a live peer forgot it")
	}
	p2.stop() // and its disk is gone: it never comes back
	waitFor(t, "p1 to hold p2 dead", 30*time.Second, func() bool {
		dead := false
		_ = p1.p.read(t.Context(), func(n *node.Node) error {
			for _, m := range n.Members() {
				dead = dead || m.ID == lost && m.State == node.PeerDead
			}
			return nil
		})
		return dead
	})
	// /healthz names the dead voter, the peer to restart or to forget
	// with --unsafe-recover.
	waitFor(t, "/healthz to name the lost voter", 20*time.Second, func() bool {
		status, data := wcall(t, p1.c, "GET", "/healthz", "")
		return status == http.StatusServiceUnavailable && strings.Contains(string(data), "32 held here lost the majority of their voters (dead: "+lost+")")
	})
	// So does a request's 503 (it was "api: unavailable; peer: unavailable"),
	// a submission's and a read's, over HTTP and through the Go client,
	// still a 503 unavailable that clients retry.
	why := "lost the majority of its voters (dead: " + lost + ")"
	if status, data := wcall(t, p1.c, "POST", "/v1/tasks", `{"handler":"echo"}`); status != http.StatusServiceUnavailable ||
		!strings.Contains(string(data), `"code":"unavailable"`) || !strings.Contains(string(data), why) ||
		!strings.Contains(string(data), "needle forget ID --unsafe-recover") {
		t.Fatalf("submission without a majority = %d %s; want 503 unavailable naming the dead voter and the way out", status, data)
	}
	_, err := p1.c.GetTask(t.Context(), tasks[0], 0)
	if ae := (*api.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeUnavailable ||
		!strings.Contains(ae.Message, "has no leader: it "+why) || !strings.Contains(ae.Message, "--unsafe-recover") {
		t.Fatalf("GetTask without a majority = %v; want 503 unavailable naming the dead voter and the way out", err)
	}
	path := "/v1/peers/" + lost + "/forget"
	for _, q := range []string{"?unsafe_recover=true&unsafe_recover=false", "?unsafe_recover=true&unsafe_recover=true", "?force=false&force=true&unsafe_recover=true"} {
		field := "unsafe_recover"
		if strings.HasPrefix(q, "?force") {
			field = "force"
		}
		if status, data := wcall(t, p1.c, "POST", path+q, ""); status != http.StatusBadRequest || !strings.Contains(string(data), `"field":"`+field+`"`) {
			t.Fatalf("forget%s = %d %s; want 400 naming %s (given twice), nothing forgotten", q, status, data, field)
		}
	}
	var forgotten bool
	_ = p1.p.read(t.Context(), func(n *node.Node) error { forgotten = n.IsForgotten(lost); return nil })
	if forgotten {
		t.Fatal("a refused forget forgot the peer")
	}
	if status, data := wcall(t, p1.c, "POST", path+"?unsafe_recover=maybe", ""); status != http.StatusBadRequest || !strings.Contains(string(data), `"field":"unsafe_recover"`) {
		t.Fatalf("forget unsafe_recover=maybe = %d %s; want 400 naming unsafe_recover", status, data)
	}
	if status, data := wcall(t, p1.c, "POST", path+"?unsafe_recover=true", ""); status != http.StatusOK ||
		string(data) != `{"forgotten":"`+lost+`","audited":true,"unsafe_recover":true}` {
		// Audited: recorded once the forget recovered the partition of
		// the entry.
		t.Fatalf("forget unsafe_recover=true = %d %s; want 200 naming it, audited", status, data)
	}
	waitFor(t, "p1 to serve every partition", 20*time.Second, func() bool { return stats(p1).Leading == 32 })
	// A repeat, plain or not, does nothing and says so: forgotten, and its
	// disk declared lost, already (404; the second was a 200 that audited
	// the forget again).
	for _, q := range []string{"", "?unsafe_recover=true"} {
		if status, data := wcall(t, p1.c, "POST", path+q, ""); status != http.StatusNotFound || !strings.Contains(string(data), `"field":"id"`) ||
			!strings.Contains(string(data), "was forgotten already") || !strings.Contains(string(data), "declared lost for good already") {
			t.Fatalf("forget%s again = %d %s; want 404 naming id: forgotten and declared lost already", q, status, data)
		}
	}
	if status, data := wcall(t, p1.c, "GET", "/v1/audit", ""); status != http.StatusOK ||
		strings.Count(string(data), `"action":"peer_forgotten","subject":"`+lost+`"`) != 1 {
		t.Fatalf("audit after the repeats = %d %s; want one peer_forgotten of %s", status, data, lost)
	}
	var recovered int
	_ = p1.p.read(t.Context(), func(n *node.Node) error { recovered = n.Counters().UnsafeRecoveries; return nil })
	if recovered != 32 {
		t.Fatalf("UnsafeRecoveries = %d; want 32", recovered)
	}
	check := func(when string) {
		t.Helper()
		for _, g := range groups {
			if gv, err := getGroupRetrying(t, p1.c, g, 30*time.Second); err != nil || gv.State != "SUCCEEDED" {
				t.Fatalf("%s: group %s = %+v, %v", when, g, gv, err)
			}
		}
		res := submitRetrying(t, p1.c, `{"mode":"parallel","tasks":[{"handler":"echo","payload":1}]}`)
		if gv, err := getGroupRetrying(t, p1.c, res.Group, 30*time.Second); err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("%s: new group %s = %+v, %v", when, res.Group, gv, err)
		}
		groups = append(groups, res.Group)
	}
	check("after the recovery")

	// From its Badger WAL: the recovered partitions reopen with p1 alone.
	p1.stop()
	p1 = startMeshPeerConfig(t, meshPeerConfig(t, dir, edit))
	waitFor(t, "p1 to serve every partition after its restart", 20*time.Second, func() bool { return stats(p1).Leading == 32 })
	check("after p1 restarted")
	var marks []string
	_ = p1.p.read(t.Context(), func(n *node.Node) error { marks = n.UnsafeRecover(); return nil })
	if len(marks) != 1 || marks[0] != lost {
		t.Fatalf("recover marks after the restart = %v; want %s", marks, lost)
	}
}
