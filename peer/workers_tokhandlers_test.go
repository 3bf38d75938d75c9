package peer

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// A worker token limited to handlers (handlers= in the token file) polls
// for those only: a poll naming another is a 403 naming it and takes
// nothing, and a waiting poll whose token is narrowed by a reload ends
// with that 403, handed no task (the task goes to a worker allowed it).
func TestWorkerTokenHandlers(t *testing.T) {
	const thumbs = "thumb-token-0123456789 name=thumbs scope=worker handlers=thumb*"
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, thumbs, revWorker))
	_, admin := startPeerWith(t, Config{Tokens: tokens})
	admin.Token = secretOf(revAdmin)

	id := submitTask(t, admin, `{"handler": "resize", "payload": 1}`)
	limited := *admin
	limited.Token = secretOf(thumbs)
	status, data := wcall(t, &limited, "POST", "/v1/workers/poll", `{"worker": "w-echo", "handlers": ["thumb", "resize"], "wait": "1s"}`)
	var body struct{ Error api.Error }
	if err := json.Unmarshal(data, &body); status != http.StatusForbidden || err != nil || body.Error.Code != api.CodeForbidden || body.Error.Field != "handlers[1]" ||
		body.Error.Message != `token "thumbs" may poll only for handlers thumb*, not "resize"` {
		t.Fatalf("a poll for another handler = %d %s; want 403 naming handlers[1]", status, data)
	}
	if tv, err := admin.GetTask(t.Context(), id, 0); err != nil || tv.State != "READY" {
		t.Fatalf("the resize task after the refused poll: %+v, %v; want READY", tv, err)
	}

	// Its own handlers: polled as any worker's.
	thumb := submitTask(t, admin, `{"handler": "thumb", "payload": 2}`)
	a := answerOf(t, startPoll(t, admin, secretOf(thumbs), "w-thumb", "10s"))
	var res api.PollResult
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != thumb {
		t.Fatalf("its own handler's poll = %d %s; want task %s", a.status, a.body, thumb)
	}

	// Narrowed by a reload while its poll waits: 403, and no task.
	old := startPoll(t, admin, secretOf(thumbs), "w-narrowed", "2m")
	waitUntil(t, func() bool { return pollingWorkers(t, admin) == 1 })
	tokens.SetTokens(tokenSet(t, revAdmin, "thumb-token-0123456789 name=thumbs scope=worker handlers=img.*", revWorker))
	next := submitTask(t, admin, `{"handler": "thumb", "payload": 3}`)
	a = answerOf(t, old)
	if a.status != http.StatusForbidden || !strings.Contains(string(a.body), `not \"thumb\"`) {
		t.Fatalf("the narrowed token's waiting poll = %d %s; want 403 naming thumb, handed no task", a.status, a.body)
	}
	good := answerOf(t, startPoll(t, admin, secretOf(revWorker), "w-good", "10s"))
	if err := json.Unmarshal(good.body, &res); good.status != 200 || err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != next {
		t.Fatalf("an allowed worker's poll = %d %s; want task %s", good.status, good.body, next)
	}
}
