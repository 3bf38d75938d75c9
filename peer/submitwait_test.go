package peer

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// TestSubmitWaitForwardsOnce submits and waits (POST /v1/tasks?wait=) on
// a peer that does not own the task's group: the owner waits for the task
// and answers it with the submission, so the request is forwarded once
// (a submit), not twice (a submit, then a wait), and the answer shows the
// task terminal although it runs for a while after its creation commits.
// With tokens too (the wait is then one a reload revoking the token cuts).
func TestSubmitWaitForwardsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	t.Run("open", func(t *testing.T) { testSubmitWaitForwardsOnce(t, nil) })
	t.Run("tokens", func(t *testing.T) { testSubmitWaitForwardsOnce(t, api.NewTokenSet(tokenSet(t, revAdmin))) })
}

func testSubmitWaitForwardsOnce(t *testing.T, tokens *api.Tokens) {
	a := startMeshPeerWith(t, Config{DataDir: t.TempDir(), Tokens: tokens})
	b := startMeshPeerWith(t, Config{DataDir: t.TempDir(), Tokens: tokens, Join: []string{a.p.tr.Addrs()[0]}})
	if tokens != nil {
		a.c.Token, b.c.Token = secretOf(revAdmin), secretOf(revAdmin)
	}
	waitLeading(t, a, b)
	key := keyOwnedBy(t, a, b, "subwait")
	var res api.SubmitTaskResponse
	waitFor(t, "the submission answered", 20*time.Second, func() bool {
		req, err := http.NewRequestWithContext(t.Context(), "POST", a.c.BaseURL+"/v1/tasks?wait=20s",
			strings.NewReader(`{"handler":"sleep","payload":{"ms":300},"key":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tokens != nil {
			req.Header.Set("Authorization", "Bearer "+secretOf(revAdmin))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return false
		}
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit and wait: %d %v", resp.StatusCode, err)
		}
		return true
	})
	if res.Task == nil || res.Task.State != "SUCCEEDED" {
		t.Fatalf("submit and wait answered %+v; want the task SUCCEEDED", res)
	}
	served := func(op string) float64 {
		var m dto.Metric
		if err := b.p.metrics.served.WithLabelValues(op).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if served(opSubmit) < 1 || served(opTask) != 0 {
		t.Errorf("the owner served %v forwarded submits and %v task reads; want the submission forwarded and no read",
			served(opSubmit), served(opTask))
	}
	if st, _ := a.c.GetTask(t.Context(), res.ID, 0); st.State != "SUCCEEDED" {
		t.Errorf("GET %s = %s; want SUCCEEDED", res.ID, st.State)
	}
}

// TestForwardedSubmitWaitRevoked revokes the token of a submission waiting
// at another owner (POST /v1/tasks?wait= forwarded once, the owner waits):
// the wait ends at once; the submission stands and the answer says so,
// its id without the task (the revoked token reads nothing more). The
// forward was cut after the owner created the group, so the owner was
// asked again without a wait, and found it: the request named itself to
// the owner, which remembers it created the group, so a keyed submission
// answers 201 (it said 200, a repeat, though this request made it), its
// group made once; a repeat of the key is 200.
func TestForwardedSubmitWaitRevoked(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	const submitter = "submit-token-012345678 name=sb scope=submit"
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, submitter))
	a := startMeshPeerWith(t, Config{DataDir: t.TempDir(), Tokens: tokens})
	b := startMeshPeerWith(t, Config{DataDir: t.TempDir(), Tokens: api.NewTokenSet(tokenSet(t, revAdmin, submitter)),
		Join: []string{a.p.tr.Addrs()[0]}})
	a.c.Token = secretOf(revAdmin)
	waitLeading(t, a, b)
	key := keyOwnedBy(t, a, b, "revoked")
	id := string(GroupIDFor(key)) + ".0"
	body := `{"handler": "thumb", "payload": 1, "key": "` + key + `"}` // no worker: READY until canceled
	ch := startRequest(t, a.c, secretOf(submitter), "POST", "/v1/tasks?wait=2m", body)
	waitUntil(t, func() bool {
		select {
		case ans := <-ch:
			// A young mesh answers 503 while it moves leadership to the
			// ring's owners (nothing made): a client asks again.
			if ans.status != http.StatusServiceUnavailable {
				t.Fatalf("the waiting submission ended before the revocation: %d %s", ans.status, ans.body)
			}
			t.Logf("the waiting submission: %d %s; asking again", ans.status, ans.body)
			ch = startRequest(t, a.c, secretOf(submitter), "POST", "/v1/tasks?wait=2m", body)
		default:
		}
		return liveWaiters(t, b.p, id) == 1
	})
	tokens.SetTokens(tokenSet(t, revAdmin))
	ans := answerOf(t, ch)
	var out struct {
		ID   string          `json:"id"`
		Task json.RawMessage `json:"task"`
	}
	if ans.status != http.StatusCreated || json.Unmarshal(ans.body, &out) != nil || out.ID != id || out.Task != nil {
		t.Fatalf("the revoked token's forwarded waiting submission = %d %s; want 201 with id %s and no task", ans.status, ans.body, id)
	}
	waitUntil(t, func() bool { return liveWaiters(t, b.p, id) == 0 }) // the owner's wait ended with it
	g, err := getGroupRetrying(t, a.c, string(GroupIDFor(key)), 0)
	if err != nil || len(g.Tasks) != 1 || g.Tasks[0].State != "READY" {
		t.Fatalf("the group after the revoked wait = %+v, %v; want its one task READY", g, err)
	}
	var status int
	var data []byte
	waitFor(t, "the repeat answered", 20*time.Second, func() bool {
		status, data = wcall(t, a.c, "POST", "/v1/tasks?wait=10ms", body)
		return status != http.StatusServiceUnavailable // asked again, as a client does
	})
	if status != http.StatusOK || !strings.Contains(string(data), id) {
		t.Fatalf("a repeat of the key, waiting = %d %s; want 200 with id %s", status, data, id)
	}
}

// TestSubmitWaitOneTrip submits and waits on the owner for a task that
// ends with its creation's commit (echo: its outcome joins the creation's
// entry): the loop routes the submission and proposes it in one trip, and
// the commit's reply carries the terminal task, so the request goes
// through the loop once, not four times (the route, the submission, a
// waiter parked, the task read). A GET ?wait= of a terminal task takes its
// view from the waiter's release: two trips (the route, the waiter), not
// three.
func TestSubmitWaitOneTrip(t *testing.T) {
	p, c, _ := startPeer(t, t.TempDir(), 2)
	taken := func() uint64 {
		var n uint64
		if err := p.read(t.Context(), func(*node.Node) error { n = p.taken; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Background commands (a sweep of the worker hub) are rare: the least
	// count over a few tries is the request's own.
	least := func(do func(i int)) uint64 {
		best := uint64(1 << 62)
		for i := range 5 {
			before := taken()
			do(i)
			best = min(best, taken()-before-1) // less the count's own read
		}
		return best
	}
	var last api.SubmitTaskResponse
	submits := least(func(i int) {
		resp, err := http.Post(c.BaseURL+"/v1/tasks?wait=10s", "application/json",
			strings.NewReader(`{"handler":"echo","payload":{"i":`+strconv.Itoa(i)+`}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&last); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit and wait: %d %v", resp.StatusCode, err)
		}
		if last.Task == nil || last.Task.State != "SUCCEEDED" || string(last.Task.Result) != `{"i":`+strconv.Itoa(i)+`}` {
			t.Fatalf("submit and wait answered %+v; want the task SUCCEEDED with its payload", last)
		}
	})
	if submits != 1 {
		t.Errorf("a submission waiting for its task took %d trips through the loop; want 1", submits)
	}
	gets := least(func(int) {
		v, err := c.GetTask(t.Context(), last.ID, 10*time.Second)
		if err != nil || v.State != "SUCCEEDED" {
			t.Fatalf("GET ?wait= = %+v, %v", v, err)
		}
	})
	if gets != 2 {
		t.Errorf("a GET ?wait= of a terminal task took %d trips through the loop; want 2 (route, waiter)", gets)
	}
}
