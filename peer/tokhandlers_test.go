package peer

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// limSubmit is a submit token limited to the img.* handlers and thumb.
const limSubmit = "imgci-token-0123456789 name=imgci scope=submit handlers=img.*,thumb"

// forbiddenField checks that a call was refused 403 forbidden naming field
// and the handler, and says what was asked on failure.
func forbiddenField(t *testing.T, what string, status int, data []byte, field, handler string) {
	t.Helper()
	var body struct{ Error api.Error }
	if err := json.Unmarshal(data, &body); status != http.StatusForbidden || err != nil || body.Error.Code != api.CodeForbidden ||
		body.Error.Field != field || !strings.Contains(body.Error.Message, `token "imgci" may `) ||
		!strings.Contains(body.Error.Message, `handlers img.*,thumb, not "`+handler+`"`) {
		t.Fatalf("%s = %d %s; want 403 forbidden naming %s and handler %q", what, status, data, field, handler)
	}
}

// counts returns how many tasks, groups and schedules the mesh holds, as
// the admin lists them.
func counts(t *testing.T, admin *api.Client) (tasks, groups, schedules int) {
	t.Helper()
	ctx := t.Context()
	tl, err := admin.ListTasks(ctx, url.Values{"limit": {"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := admin.ListGroups(ctx, url.Values{"limit": {"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := admin.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(tl.Tasks), len(gl.Groups), len(sl)
}

// A submit token limited to handlers (handlers=) creates work of those
// only, names or prefixes: a task, a group (any mode), a schedule, a
// change of one, that names another handler is a 403 naming that
// handler's field, and leaves nothing behind; and it may not retry,
// cancel, change, fire, pause, resume or delete the work of another
// handler (403, nothing changed). Reads are not limited.
func TestSubmitTokenHandlers(t *testing.T) {
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, limSubmit))
	_, admin := startPeerWith(t, Config{Tokens: tokens})
	admin.Token = secretOf(revAdmin)
	lim := *admin
	lim.Token = secretOf(limSubmit)
	call := func(method, path, body string) (int, []byte) { return wcall(t, &lim, method, path, body) }

	// Its own handlers, by prefix and by name.
	own := submitTask(t, &lim, `{"handler": "img.resize", "payload": 1}`)
	thumb := submitTask(t, &lim, `{"handler": "thumb", "payload": 2}`)
	if status, data := call("POST", "/v1/groups", `{"tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "thumb"}]}`); status != http.StatusCreated {
		t.Fatalf("a group of its handlers = %d %s; want 201", status, data)
	}

	// Creation naming another handler: refused before anything is written.
	tasks, groups, schedules := counts(t, admin)
	for _, c := range []struct{ what, path, body, field, handler string }{
		{"a task", "/v1/tasks", `{"handler": "video.cut", "payload": 1}`, "handler", "video.cut"},
		{"a task with ?wait=", "/v1/tasks?wait=1s", `{"handler": "video.cut", "payload": 1}`, "handler", "video.cut"},
		{"a task of a prefix's stem", "/v1/tasks", `{"handler": "img", "payload": 1}`, "handler", "img"},
		{"a parallel group", "/v1/groups", `{"tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "thumb"}, {"name": "c", "handler": "img.c"}, {"name": "d", "handler": "video.cut"}]}`, "tasks[3].handler", "video.cut"},
		{"a dag", "/v1/groups", `{"mode": "dag", "tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "thumbs", "deps": ["a"]}]}`, "tasks[1].handler", "thumbs"},
		{"a staged group", "/v1/groups", `{"mode": "staged", "stages": [[{"handler": "img.a"}], [{"handler": "thumb"}, {"handler": "video.cut"}]]}`, "stages[1][1].handler", "video.cut"},
		{"a streaming pipeline", "/v1/groups", `{"mode": "pipeline", "stages": [{"name": "p", "handler": "img.parse"}, {"name": "l", "handler": "db.load"}], "items": [1, 2]}`, "stages[1].handler", "db.load"},
		{"a broadcast to workers", "/v1/groups", `{"mode": "broadcast", "to": "workers", "tasks": [{"handler": "video.cut"}]}`, "tasks[0].handler", "video.cut"},
		{"a schedule", "/v1/schedules", `{"cron": "0 0 1 1 *", "group": {"tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "video.cut"}]}}`, "group.tasks[1].handler", "video.cut"},
	} {
		status, data := call("POST", c.path, c.body)
		forbiddenField(t, "POST "+c.path+" of "+c.what, status, data, c.field, c.handler)
	}
	if nt, ng, ns := counts(t, admin); nt != tasks || ng != groups || ns != schedules {
		t.Fatalf("after the refused creations: %d tasks, %d groups, %d schedules; want %d, %d, %d (nothing created)", nt, ng, ns, tasks, groups, schedules)
	}

	// Another handler's task and group, made by the admin: neither
	// canceled nor retried by the limited token.
	video := submitTask(t, admin, `{"handler": "video.cut", "payload": 1}`)
	events := func(id string) string {
		status, data := wcall(t, admin, "GET", "/v1/tasks/"+id+"/events", "")
		if status != 200 {
			t.Fatalf("events of %s = %d %s", id, status, data)
		}
		return string(data)
	}
	before := events(video)
	status, data := call("POST", "/v1/tasks/"+video+"/cancel", "")
	forbiddenField(t, "cancel of another handler's task", status, data, "handler", "video.cut")
	if tv, err := admin.GetTask(t.Context(), video, 0); err != nil || tv.State != "READY" || events(video) != before {
		t.Fatalf("the task after the refused cancel: %+v, %v (events changed: %v); want READY, unchanged", tv, err, events(video) != before)
	}
	if _, err := admin.CancelTask(t.Context(), video); err != nil {
		t.Fatal(err)
	}
	before = events(video)
	status, data = call("POST", "/v1/tasks/"+video+"/retry", "")
	forbiddenField(t, "retry of another handler's task", status, data, "handler", "video.cut")
	if tv, err := admin.GetTask(t.Context(), video, 0); err != nil || tv.State != "CANCELED" || events(video) != before {
		t.Fatalf("the task after the refused retry: %+v, %v; want CANCELED, unchanged", tv, err)
	}

	mixed, err := admin.SubmitGroupJSON(t.Context(), []byte(`{"tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "video.b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	status, data = call("POST", "/v1/groups/"+mixed.Group+"/cancel", "")
	forbiddenField(t, "cancel of a group holding another handler's task", status, data, "tasks[1].handler", "video.b")
	if g, err := admin.GetGroup(t.Context(), mixed.Group, 0); err != nil || g.State != "RUNNING" || g.Counts["READY"] != 2 {
		t.Fatalf("the group after the refused cancel: %+v, %v; want RUNNING, both tasks READY", g, err)
	}
	if _, err := admin.CancelGroup(t.Context(), mixed.Group); err != nil {
		t.Fatal(err)
	}
	status, data = call("POST", "/v1/groups/"+mixed.Group+"/retry", "")
	forbiddenField(t, "retry of a group holding another handler's task", status, data, "tasks[1].handler", "video.b")
	if g, err := admin.GetGroup(t.Context(), mixed.Group, 0); err != nil || g.State != "CANCELED" || g.Counts["CANCELED"] != 2 {
		t.Fatalf("the group after the refused retry: %+v, %v; want CANCELED", g, err)
	}

	// Its own: canceled and retried.
	if status, data := call("POST", "/v1/tasks/"+own+"/cancel", ""); status != 200 {
		t.Fatalf("cancel of its own task = %d %s", status, data)
	}
	if status, data := call("POST", "/v1/tasks/"+own+"/retry", ""); status != 200 {
		t.Fatalf("retry of its own task = %d %s", status, data)
	}
	// Reads are read scope's: another handler's task reads as any.
	if status, data := call("GET", "/v1/tasks/"+video, ""); status != 200 {
		t.Fatalf("a read of another handler's task = %d %s; want 200", status, data)
	}
	if status, data := call("GET", "/v1/tasks/"+thumb, ""); status != 200 {
		t.Fatalf("a read of its own task = %d %s", status, data)
	}

	// Another handler's schedule: not changed, fired, paused, resumed nor
	// deleted.
	sched, err := admin.CreateSchedule(t.Context(), &api.CreateScheduleRequest{Cron: "0 0 1 1 *",
		Group: []byte(`{"tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "video.b"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	sp := "/v1/schedules/" + sched.ID
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", sp, `{"name": "mine"}`},
		{"POST", sp + "/trigger", ""},
		{"POST", sp + "/pause", ""},
		{"POST", sp + "/resume", ""},
		{"DELETE", sp, ""},
	} {
		status, data := call(c.method, c.path, c.body)
		forbiddenField(t, c.method+" "+c.path+" of another handler's schedule", status, data, "group.tasks[1].handler", "video.b")
	}
	if got, err := admin.GetSchedule(t.Context(), sched.ID); err != nil || got.Revision != sched.Revision || got.Paused || len(got.Firings) != 0 {
		t.Fatalf("the schedule after the refused calls: %+v, %v; want it unchanged (revision %s, not paused, not fired)", got, err, sched.Revision)
	}

	// Its own schedule: changed, but not into another handler's.
	mine, err := lim.CreateSchedule(t.Context(), &api.CreateScheduleRequest{Cron: "0 0 1 1 *", Group: []byte(`{"tasks": [{"name": "a", "handler": "img.a"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	status, data = call("PATCH", "/v1/schedules/"+mine.ID, `{"group": {"tasks": [{"name": "a", "handler": "img.a"}, {"name": "b", "handler": "video.b"}]}}`)
	forbiddenField(t, "a change of its schedule to another handler", status, data, "group.tasks[1].handler", "video.b")
	if got, err := admin.GetSchedule(t.Context(), mine.ID); err != nil || got.Revision != mine.Revision {
		t.Fatalf("its schedule after the refused change: %+v, %v; want revision %s", got, err, mine.Revision)
	}
	if status, data := call("PATCH", "/v1/schedules/"+mine.ID, `{"name": "mine", "group": {"tasks": [{"name": "t", "handler": "thumb"}]}}`); status != 200 {
		t.Fatalf("a change of its schedule within its handlers = %d %s; want 200", status, data)
	}
	if status, data := call("POST", "/v1/schedules/"+mine.ID+"/trigger", ""); status != http.StatusCreated {
		t.Fatalf("a firing of its schedule = %d %s; want 201", status, data)
	}
}

// liveWaiters counts the ?wait= reads parked in p's loop for task or
// group id whose client still waits (the ones that went stay parked until
// the loop's sweep).
func liveWaiters(t *testing.T, p *Peer, id string) int {
	t.Helper()
	var n int
	err := p.read(t.Context(), func(*node.Node) error {
		for _, w := range append(p.waiters.tasks[shard.TaskID(id)], p.waiters.groups[shard.GroupID(id)]...) {
			if w.ctx.Err() == nil {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startGet sends a GET with token in the background; its answer is the
// whole response.
func startGet(t *testing.T, c *api.Client, token, path string) <-chan pollAnswer {
	return startRequest(t, c, token, "GET", path, "")
}

// A read that waits (GET ?wait= of a task or a group) ends at once when
// its token is removed from the set, as a reload of the token file does:
// 401, as a new request with it would get; 403 once its token no longer
// holds read; and a token kept through a reload keeps its wait.
func TestWaitingReadRevoked(t *testing.T) {
	const reader = "reader-token-012345678 name=rd scope=read"
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, reader))
	p, admin := startPeerWith(t, Config{Tokens: tokens})
	admin.Token = secretOf(revAdmin)
	id := submitTask(t, admin, `{"handler": "thumb", "payload": 1}`) // no worker: READY until canceled
	group := string(shard.TaskID(id).Group())

	// Removed: 401, for the task's wait and the group's.
	task := startGet(t, admin, secretOf(reader), "/v1/tasks/"+id+"?wait=2m")
	grp := startGet(t, admin, secretOf(reader), "/v1/groups/"+group+"?wait=2m")
	waitUntil(t, func() bool { return liveWaiters(t, p, id) == 1 && liveWaiters(t, p, group) == 1 })
	tokens.SetTokens(tokenSet(t, revAdmin))
	for what, ch := range map[string]<-chan pollAnswer{"task": task, "group": grp} {
		if a := answerOf(t, ch); a.status != http.StatusUnauthorized || errCode(a.body) != api.CodeUnauthenticated || a.auth == "" {
			t.Fatalf("the removed token's waiting %s read = %d %s (WWW-Authenticate %q); want 401 unauthenticated", what, a.status, a.body, a.auth)
		}
	}

	// Left without read: 403 naming the scope.
	tokens.SetTokens(tokenSet(t, revAdmin, reader))
	task = startGet(t, admin, secretOf(reader), "/v1/tasks/"+id+"?wait=2m")
	waitUntil(t, func() bool { return liveWaiters(t, p, id) == 1 })
	tokens.SetTokens(tokenSet(t, revAdmin, "reader-token-012345678 name=rd scope=worker"))
	if a := answerOf(t, task); a.status != http.StatusForbidden || errCode(a.body) != api.CodeForbidden || !strings.Contains(string(a.body), "it needs scope read") {
		t.Fatalf("the demoted token's waiting read = %d %s; want 403 naming scope read", a.status, a.body)
	}

	// Kept through a reload: the wait goes on, and ends with the task.
	tokens.SetTokens(tokenSet(t, revAdmin, reader))
	task = startGet(t, admin, secretOf(reader), "/v1/tasks/"+id+"?wait=2m")
	waitUntil(t, func() bool { return liveWaiters(t, p, id) == 1 })
	tokens.SetTokens(tokenSet(t, reader, revAdmin))
	if _, err := admin.CancelTask(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if a := answerOf(t, task); a.status != 200 || !strings.Contains(string(a.body), `"state":"CANCELED"`) {
		t.Fatalf("the kept token's waiting read = %d %s; want 200, the task CANCELED", a.status, a.body)
	}
}

// A followed log (GET /v1/tasks/{id}/logs?follow=true) ends when its
// token is removed from the set: its status went out with the stream's
// start, so the stream is closed (no "end" event); a new follow with the
// token is the 401.
func TestFollowedLogRevoked(t *testing.T) {
	const reader = "reader-token-012345678 name=rd scope=read"
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, reader))
	_, admin := startPeerWith(t, Config{Tokens: tokens})
	admin.Token = secretOf(revAdmin)
	id := submitTask(t, admin, `{"handler": "thumb", "payload": 1}`) // never runs: followed until the end

	req, err := http.NewRequestWithContext(t.Context(), "GET", admin.BaseURL+"/v1/tasks/"+id+"/logs?follow=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secretOf(reader))
	resp, err := http.DefaultClient.Do(req) // the stream's headers: the follow is under way
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow = %d %s; want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rest := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(bufio.NewReader(resp.Body))
		rest <- string(data)
	}()
	tokens.SetTokens(tokenSet(t, revAdmin))
	select {
	case data := <-rest:
		if strings.Contains(data, "event: end") {
			t.Fatalf("the revoked follow's stream = %q; want it closed without an end event", data)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the revoked token's follow did not end in 30 s")
	}
	a := answerOf(t, startGet(t, admin, secretOf(reader), "/v1/tasks/"+id+"/logs?follow=true"))
	if a.status != http.StatusUnauthorized || errCode(a.body) != api.CodeUnauthenticated {
		t.Fatalf("a new follow with the removed token = %d %s; want 401", a.status, a.body)
	}
}

// A submission that waits (POST /v1/tasks?wait=) whose token a reload
// removes, or leaves without submit, ends its wait at once; its task
// was created with a good token, so the answer is still the 201 with its
// id, without the task (the revoked token reads nothing more). A token
// kept through a reload keeps its wait.
func TestWaitingSubmitRevoked(t *testing.T) {
	const submitter = "submit-token-012345678 name=sb scope=submit"
	tokens := api.NewTokenSet(tokenSet(t, revAdmin, submitter))
	p, admin := startPeerWith(t, Config{Tokens: tokens})
	admin.Token = secretOf(revAdmin)
	submit := func(key string) (id string, ch <-chan pollAnswer) {
		id = string(GroupIDFor(key)) + ".0"
		ch = startRequest(t, admin, secretOf(submitter), "POST", "/v1/tasks?wait=2m",
			`{"handler": "thumb", "payload": 1, "key": "`+key+`"}`) // no worker: READY until canceled
		waitUntil(t, func() bool { return liveWaiters(t, p, id) == 1 })
		return id, ch
	}
	created := func(what, id string, a pollAnswer) {
		t.Helper()
		var out struct {
			ID   string          `json:"id"`
			Task json.RawMessage `json:"task"`
		}
		if a.status != http.StatusCreated || json.Unmarshal(a.body, &out) != nil || out.ID != id || out.Task != nil {
			t.Fatalf("the %s token's waiting submission = %d %s; want 201 with id %s and no task", what, a.status, a.body, id)
		}
		if _, err := admin.GetTask(t.Context(), id, 0); err != nil {
			t.Fatalf("the %s token's submitted task: %v; want it created", what, err)
		}
	}

	id, ch := submit("removed")
	tokens.SetTokens(tokenSet(t, revAdmin))
	created("removed", id, answerOf(t, ch))

	tokens.SetTokens(tokenSet(t, revAdmin, submitter))
	id, ch = submit("demoted")
	tokens.SetTokens(tokenSet(t, revAdmin, "submit-token-012345678 name=sb scope=read"))
	created("demoted", id, answerOf(t, ch))

	tokens.SetTokens(tokenSet(t, revAdmin, submitter))
	id, ch = submit("kept")
	tokens.SetTokens(tokenSet(t, submitter, revAdmin))
	if _, err := admin.CancelTask(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if a := answerOf(t, ch); a.status != http.StatusCreated || !strings.Contains(string(a.body), `"state":"CANCELED"`) {
		t.Fatalf("the kept token's waiting submission = %d %s; want 201, the task CANCELED", a.status, a.body)
	}
}
