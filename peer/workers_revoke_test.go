package peer

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// Tokens of the revocation tests: an admin that submits and reads, two
// workers.
const (
	revAdmin   = "admin-token-0123456789 name=adm"
	revWorker  = "worker-token-012345678 name=wk scope=worker"
	revWorker2 = "worker2-token-01234567 name=wk2 scope=worker"
)

// tokenSet parses token file lines.
func tokenSet(t *testing.T, lines ...string) []api.Token {
	t.Helper()
	list, err := api.ParseTokens(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// secretOf is the token of a token file line.
func secretOf(line string) string { return strings.Fields(line)[0] }

// pollAnswer is a poll's answer: its status, its WWW-Authenticate and its
// body.
type pollAnswer struct {
	status int
	auth   string
	body   []byte
}

// startPoll sends a worker's poll with token in the background.
func startPoll(t *testing.T, c *api.Client, token, worker, wait string) <-chan pollAnswer {
	body := `{"worker": "` + worker + `", "handlers": ["thumb"], "max": 4, "wait": "` + wait + `"}`
	return startRequest(t, c, token, "POST", "/v1/workers/poll", body)
}

// startRequest sends a request with token in the background (a JSON body
// unless body is ""); its answer is the whole response.
func startRequest(t *testing.T, c *api.Client, token, method, path, body string) <-chan pollAnswer {
	out := make(chan pollAnswer, 1)
	go func() {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, c.BaseURL+path, rd)
		if err != nil {
			out <- pollAnswer{body: []byte(err.Error())}
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- pollAnswer{body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		out <- pollAnswer{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), data}
	}()
	return out
}

// answerOf waits for a poll's answer.
func answerOf(t *testing.T, ch <-chan pollAnswer) pollAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the poll did not end in 30 s")
	}
	return pollAnswer{}
}

// pollingWorkers returns how many workers have a poll waiting.
func pollingWorkers(t *testing.T, admin *api.Client) int {
	status, data := wcall(t, admin, "GET", "/v1/workers", "")
	if status != 200 {
		t.Fatalf("GET /v1/workers = %d %s", status, data)
	}
	return strings.Count(string(data), `"polling":true`)
}

// A worker's poll that waits when its token is revoked (removed from the
// set, as a reload of --api-token-file does on SIGHUP) ends at once with
// the 401 a new request would get, or the 403 once its token no longer
// holds the worker scope, and is handed no task: the tasks go to a worker
// whose token is good (audit F12).
func TestWorkerPollRevoked(t *testing.T) {
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, revWorker, revWorker2))
	_, admin := startPeerWith(t, Config{Tokens: tokens})
	admin.Token = secretOf(revAdmin)

	// Removed: 401.
	old := startPoll(t, admin, secretOf(revWorker), "w-revoked", "2m")
	waitUntil(t, func() bool { return pollingWorkers(t, admin) == 1 })
	tokens.SetTokens(tokenSet(t, revAdmin, revWorker2))
	id := submitTask(t, admin, `{"handler": "thumb", "payload": 1}`)
	a := answerOf(t, old)
	if a.status != http.StatusUnauthorized || errCode(a.body) != api.CodeUnauthenticated || a.auth == "" {
		t.Fatalf("the revoked token's waiting poll = %d %s (WWW-Authenticate %q); want 401 unauthenticated, handed no task", a.status, a.body, a.auth)
	}
	good := answerOf(t, startPoll(t, admin, secretOf(revWorker2), "w-good", "10s"))
	var res api.PollResult
	if err := json.Unmarshal(good.body, &res); good.status != 200 || err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != id {
		t.Fatalf("a good worker's poll = %d %s; want task %s", good.status, good.body, id)
	}

	// Its worker scope dropped: 403, naming the scope it needs.
	old = startPoll(t, admin, secretOf(revWorker2), "w-demoted", "2m")
	waitUntil(t, func() bool { return pollingWorkers(t, admin) == 1 })
	tokens.SetTokens(tokenSet(t, revAdmin, revWorker, "worker2-token-01234567 name=wk2 scope=read"))
	id = submitTask(t, admin, `{"handler": "thumb", "payload": 2}`)
	a = answerOf(t, old)
	if a.status != http.StatusForbidden || errCode(a.body) != api.CodeForbidden || !strings.Contains(string(a.body), "it needs scope worker") {
		t.Fatalf("the demoted token's waiting poll = %d %s; want 403 forbidden naming scope worker, handed no task", a.status, a.body)
	}
	good = answerOf(t, startPoll(t, admin, secretOf(revWorker), "w-good", "10s"))
	if err := json.Unmarshal(good.body, &res); good.status != 200 || err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != id {
		t.Fatalf("a good worker's poll = %d %s; want task %s", good.status, good.body, id)
	}

	// A token that stays, scopes unchanged, through a reload keeps its
	// waiting poll.
	kept := startPoll(t, admin, secretOf(revWorker), "w-kept", "2m")
	waitUntil(t, func() bool { return pollingWorkers(t, admin) == 1 })
	tokens.SetTokens(tokenSet(t, revAdmin, revWorker))
	id = submitTask(t, admin, `{"handler": "thumb", "payload": 3}`)
	a = answerOf(t, kept)
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != id {
		t.Fatalf("a kept token's waiting poll = %d %s; want task %s", a.status, a.body, id)
	}
}

// A task handed out as the poll's token is revoked, before the check
// that wakes the poll, goes to another waiting poll, never to the revoked
// one, and is not lost: revoked before the hand-off (the poll is ended,
// handed nothing), and revoked between the hand-off and the poll's answer
// (its lease is voided and the task goes to the other poll).
func TestWorkerPollRevokedRace(t *testing.T) {
	revoked := &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthenticated, Message: "revoked"}
	for _, when := range []string{"before the hand-off", "after the hand-off"} {
		t.Run(when, func(t *testing.T) {
			p, c := startPeerWith(t, Config{})
			var off atomic.Bool
			authorized := func() error { // called under the hub's lock
				if off.Load() || when == "after the hand-off" && len(p.hub.byTask) > 0 {
					return revoked
				}
				return nil
			}
			type result struct {
				res api.PollResult
				err error
			}
			poll := func(worker string, check func() error) <-chan result {
				out := make(chan result, 1)
				go func() {
					res, err := p.hub.Poll(t.Context(), api.PollRequest{Worker: worker, Handlers: []string{"thumb"}, Max: 1,
						Wait: 2 * time.Minute, Authorized: check})
					out <- result{res, err}
				}()
				return out
			}
			first := poll("w-revoked", authorized) // the oldest poll: served first
			waitUntil(t, func() bool { return pollingWorkers(t, c) == 1 })
			second := poll("w-good", nil)
			waitUntil(t, func() bool { return pollingWorkers(t, c) == 2 })
			if when == "before the hand-off" {
				off.Store(true) // nothing wakes the poll: the hand-off must check
			}
			id := submitTask(t, c, `{"handler": "thumb", "payload": 1}`)
			var r result
			select {
			case r = <-first:
			case <-time.After(30 * time.Second):
				t.Fatal("the revoked poll did not end")
			}
			if !errors.Is(r.err, revoked) || len(r.res.Tasks) != 0 {
				t.Fatalf("the revoked poll = %+v, %v; want no task and its token's error", r.res, r.err)
			}
			select {
			case r = <-second:
			case <-time.After(30 * time.Second):
				t.Fatal("the good poll got nothing")
			}
			if r.err != nil || len(r.res.Tasks) != 1 || r.res.Tasks[0].ID != id {
				t.Fatalf("the good poll = %+v, %v; want task %s", r.res, r.err, id)
			}
		})
	}
}

// A worker's other calls are authorized when they arrive: once its token
// is revoked, the outcome it reports on a lease it holds is refused (401)
// and changes nothing; the task runs again when the lease ends (its
// worker, which can poll and heartbeat no more, is dead after
// --worker-ttl), and a worker with a good token runs it.
func TestWorkerReportRevoked(t *testing.T) {
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, revWorker, revWorker2))
	_, admin := startPeerWith(t, Config{Tokens: tokens, WorkerTTL: 500 * time.Millisecond})
	admin.Token = secretOf(revAdmin)
	id := submitTask(t, admin, `{"handler": "thumb", "payload": 1}`)
	a := answerOf(t, startPoll(t, admin, secretOf(revWorker), "w-revoked", "10s"))
	var res api.PollResult
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Tasks) != 1 {
		t.Fatalf("poll = %d %s; want task %s", a.status, a.body, id)
	}
	lease := res.Tasks[0].Lease
	tokens.SetTokens(tokenSet(t, revAdmin, revWorker2))
	w := *admin
	w.Token = secretOf(revWorker)
	for _, op := range []string{"heartbeat", "complete"} {
		if status, data := wcall(t, &w, "POST", "/v1/leases/"+lease+"/"+op, ""); status != http.StatusUnauthorized || errCode(data) != api.CodeUnauthenticated {
			t.Fatalf("%s with the revoked token = %d %s; want 401", op, status, data)
		}
	}
	if got, err := admin.GetTask(t.Context(), id, 0); err != nil || got.State != "RUNNING" || got.Round != 1 {
		t.Fatalf("task after the refused outcome = %+v, %v; want RUNNING in round 1 still", got, err)
	}
	a = answerOf(t, startPoll(t, admin, secretOf(revWorker2), "w-good", "30s"))
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != id || res.Tasks[0].Round < 2 {
		t.Fatalf("a good worker's poll = %d %s; want task %s again, in a later round", a.status, a.body, id)
	}
	w.Token = secretOf(revWorker2)
	if status, data := wcall(t, &w, "POST", "/v1/leases/"+res.Tasks[0].Lease+"/complete", `{"result": 1}`); status != 200 {
		t.Fatalf("complete with the good token = %d %s", status, data)
	}
	if got, err := admin.GetTask(t.Context(), id, 10*time.Second); err != nil || got.State != "SUCCEEDED" || got.Attempt != 1 {
		t.Fatalf("task = %+v, %v; want SUCCEEDED, one attempt spent", got, err)
	}
}
