package peer

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// startMemMesh starts n peers on one memNet (the first founds the mesh)
// and waits, on the virtual clock, until every partition has min(n, 3)
// voters and every peer leads some.
func startMemMesh(t *testing.T, n, parts int) (*memNet, []*memPeer) {
	t.Helper()
	mn := newMemNet()
	var peers []*memPeer
	for i := range n {
		cfg := Config{Slots: 2, Partitions: parts}
		if i > 0 {
			cfg.Join = []string{"/memory/p0"} // not a founder; the memNet reaches everyone
		}
		peers = append(peers, startMemPeer(t, mn, fmt.Sprintf("p%d", i), cfg))
	}
	waitFor(t, "every partition replicated, leadership on every peer", time.Minute, func() bool {
		for _, mp := range peers {
			var st node.Stats
			_ = mp.p.read(t.Context(), func(n *node.Node) error { st = n.Stats(); return nil })
			if st.Voter != parts || st.Leading == 0 {
				return false
			}
		}
		return true
	})
	return mn, peers
}

// TestMemMesh runs three peers in one process on the virtual clock: a
// submission through any peer reaches its owner, errors of a remote owner
// reach the client as the same kind and field, and when a peer stops the
// others take its partitions over and finish the work.
func TestMemMesh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, peers := startMemMesh(t, 3, 16)
		ctx := t.Context()
		var groups []string
		for i := range 6 {
			body := fmt.Sprintf(`{"mode":"parallel","key":"mem-%d","tasks":[{"handler":"echo","payload":%d},{"handler":"sleep","payload":{"ms":50}}]}`, i, i)
			groups = append(groups, submitRetrying(t, peers[i%3].c, body).Group)
		}
		for _, g := range groups {
			gv, err := peers[1].c.GetGroup(ctx, g, 10*time.Second)
			if err != nil || gv.State != "SUCCEEDED" {
				t.Fatalf("group %s through p1 = %+v, %v", g, gv, err)
			}
		}
		checkRemoteErrors(t, peers, groups[0])
		peers[2].stop()
		for i := range 6 {
			body := fmt.Sprintf(`{"mode":"parallel","tasks":[{"handler":"echo","payload":%d}]}`, i)
			res := submitRetrying(t, peers[0].c, body)
			g, err := peers[0].c.GetGroup(ctx, res.Group, 15*time.Second)
			if err != nil || g.State != "SUCCEEDED" {
				t.Fatalf("group %s after p2 stopped = %+v, %v", res.Group, g, err)
			}
		}
		if tk, err := peers[0].c.GetTask(ctx, groups[0]+".0", 0); err != nil || string(tk.Result) != "0" {
			t.Fatalf("old result after failover = %+v, %v", tk, err)
		}
	})
}

// checkRemoteErrors asks every peer, owner or not, for things that fail
// at the owner: each answers the owner's status, code and field.
func checkRemoteErrors(t *testing.T, peers []*memPeer, g string) {
	t.Helper()
	ctx := t.Context()
	for i, mp := range peers {
		_, err := mp.c.SubmitGroupJSON(ctx, []byte(`{"mode":"parallel","key":"mem-0","tasks":[{"handler":"echo","payload":"other"}]}`))
		wantError(t, fmt.Sprintf("p%d: a key reused with another body", i), err, http.StatusConflict, api.CodeConflict, "key")
		_, err = mp.c.RetryTask(ctx, g+".0", "")
		wantError(t, fmt.Sprintf("p%d: a retry of a SUCCEEDED task", i), err, http.StatusConflict, api.CodeConflict, "")
		_, err = mp.c.GetTask(ctx, g+".9", 0)
		wantError(t, fmt.Sprintf("p%d: a task that does not exist", i), err, http.StatusNotFound, api.CodeNotFound, "")
	}
}

func wantError(t *testing.T, what string, err error, status int, code, field string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code || ae.Field != field {
		t.Errorf("%s = %v; want %d %s naming %q", what, err, status, code, field)
	}
}

// TestMemMeshCutLink cuts the link between a peer and the owner of a
// group: asked through that peer the group is 503 unavailable (the
// forward fails, retried for about a second), through the third peer it is
// there, and once the link heals the first peer serves it again.
func TestMemMeshCutLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn, peers := startMemMesh(t, 3, 16)
		ctx := t.Context()
		var g string
		for i := 0; g == ""; i++ {
			key := fmt.Sprint("cut-", i)
			var owner string
			_ = peers[0].p.read(ctx, func(n *node.Node) error { owner = n.Owner(GroupIDFor(key)); return nil })
			if owner == "p1" {
				body := fmt.Sprintf(`{"mode":"parallel","key":%q,"tasks":[{"handler":"echo","payload":1}]}`, key)
				g = submitRetrying(t, peers[2].c, body).Group
			}
		}
		mn.setCut("p0", "p1", true)
		_, err := peers[0].c.GetGroup(ctx, g, 0)
		wantError(t, "a group whose owner is cut off", err, http.StatusServiceUnavailable, api.CodeUnavailable, "")
		if gv, err := peers[2].c.GetGroup(ctx, g, 10*time.Second); err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("group through p2 = %+v, %v", gv, err)
		}
		mn.setCut("p0", "p1", false)
		if gv, err := peers[0].c.GetGroup(ctx, g, 0); err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("group through p0 after the heal = %+v, %v", gv, err)
		}
	})
}

// Each peer's build version (Config.Version, needled's build) travels in
// its heartbeats: GET /v1/peers on any peer names every peer's version,
// and a peer of a release before it shows "" (needle peers: unknown).
func TestMemMeshPeerVersions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := newMemNet()
		versions := []string{"v1.1.0", "v1.2.0", ""} // p2 is of an older release
		var peers []*memPeer
		for i, v := range versions {
			cfg := Config{Slots: 2, Partitions: 8, Version: v}
			if i > 0 {
				cfg.Join = []string{"/memory/p0"}
			}
			peers = append(peers, startMemPeer(t, mn, fmt.Sprintf("p%d", i), cfg))
		}
		want := map[string]string{}
		for i, mp := range peers {
			want[mp.p.ID()] = versions[i]
		}
		var got map[string]string
		waitFor(t, "every peer's version in every peer's /v1/peers", time.Minute, func() bool {
			for _, mp := range peers {
				ps, err := mp.c.Peers(t.Context())
				if err != nil || len(ps.Peers) != len(peers) {
					return false
				}
				got = map[string]string{}
				for _, p := range ps.Peers {
					got[p.ID] = p.Version
				}
				if !maps.Equal(got, want) {
					return false
				}
			}
			return true
		})
		resp, err := peers[0].c.HTTP.Get("http://localhost/v1/peers")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(data), `"version":"v1.2.0"`) || !strings.Contains(string(data), `"version":""`) {
			t.Fatalf("GET /v1/peers = %s; want each peer's version, \"\" for the older one", data)
		}
	})
}
