package peer

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// previousRequest and previousResponse are the previous release's
// forwarded request and answer: one struct for every op. A peer of that
// release writes and reads them; the typed requests must be the same JSON.
type previousRequest struct {
	V       int                 `json:"v"`
	Op      string              `json:"op"`
	Spec    *shard.GroupSpec    `json:"spec,omitempty"`
	Task    shard.TaskID        `json:"task,omitempty"`
	Group   shard.GroupID       `json:"group,omitempty"`
	Wait    time.Duration       `json:"wait,omitempty"`
	NoTasks bool                `json:"no_tasks,omitempty"`
	By      string              `json:"by,omitempty"`
	Sched   *shard.ScheduleSpec `json:"sched,omitempty"`
	Tag     string              `json:"tag,omitempty"`
	Filter  *shard.Filter       `json:"filter,omitempty"`
	Groups  bool                `json:"groups,omitempty"`
	Key     string              `json:"key,omitempty"`
	Round   uint64              `json:"round,omitempty"`
	From    int                 `json:"from,omitempty"`
	Trace   string              `json:"trace,omitempty"`
}

type previousResponse struct {
	Err       string               `json:"err,omitempty"`
	Msg       string               `json:"msg,omitempty"`
	Field     *shard.FieldError    `json:"field,omitempty"`
	Submit    *api.SubmitResult    `json:"submit,omitempty"`
	Task      *shard.TaskView      `json:"task,omitempty"`
	Group     *shard.GroupView     `json:"group,omitempty"`
	Events    []shard.TaskEvent    `json:"events,omitempty"`
	Schedule  *shard.ScheduleView  `json:"schedule,omitempty"`
	Schedules []shard.ScheduleView `json:"schedules,omitempty"`
	Audit     []shard.AuditEntry   `json:"audit,omitempty"`
	Created   bool                 `json:"created,omitempty"`
	List      *node.ListResult     `json:"list,omitempty"`
	Stats     *node.StatsResult    `json:"stats,omitempty"`
	Logs      *LogPage             `json:"logs,omitempty"`
	Workers   []api.WorkerInfo     `json:"workers,omitempty"`
}

// sameJSON reports whether a and b encode to the same JSON object (field
// order aside).
func sameJSON(t *testing.T, a, b any) (string, string, bool) {
	t.Helper()
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if err := json.Unmarshal(ja, &ma); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb, &mb); err != nil {
		t.Fatal(err)
	}
	return string(ja), string(jb), reflect.DeepEqual(ma, mb)
}

// TestRequestWire: every typed request is, on the wire, the previous
// release's request of its op, and opens with the header readHeader reads
// without a full parse; every op has a server.
func TestRequestWire(t *testing.T) {
	spec := &shard.GroupSpec{ID: "g1", Tasks: []shard.TaskSpec{{Handler: "echo"}}}
	sched := &shard.ScheduleSpec{ID: "s1", Every: time.Minute}
	filter := &shard.Filter{Limit: 5}
	ref := scheduleRef{ID: "s1", By: "ann"}
	for _, c := range []struct {
		req meshReq
		old previousRequest
	}{
		{&submitReq{Spec: spec}, previousRequest{Op: "submit", Spec: spec}},
		{&taskReq{Task: "g1.0", Wait: time.Second}, previousRequest{Op: "task", Task: "g1.0", Wait: time.Second}},
		{&groupReq{Group: "g1", Wait: time.Second, NoTasks: true}, previousRequest{Op: "group", Group: "g1", Wait: time.Second, NoTasks: true}},
		{&eventsReq{Task: "g1.0"}, previousRequest{Op: "events", Task: "g1.0"}},
		{&cancelReq{Group: "g1", Task: "g1.0", By: "ann"}, previousRequest{Op: "cancel", Group: "g1", Task: "g1.0", By: "ann"}},
		{&retryReq{Group: "g1", By: "ann", Key: "k"}, previousRequest{Op: "retry", Group: "g1", By: "ann", Key: "k"}},
		{&logsReq{Task: "g1.0", Round: 2, From: 7}, previousRequest{Op: "logs", Task: "g1.0", Round: 2, From: 7}},
		{&listReq{Filter: filter, Groups: true}, previousRequest{Op: "list", Filter: filter, Groups: true}},
		{&statsReq{}, previousRequest{Op: "stats"}},
		{&auditReq{}, previousRequest{Op: "audit"}},
		{&workersReq{}, previousRequest{Op: "workers"}},
		{&scheduleSetReq{Sched: sched, By: "ann"}, previousRequest{Op: "schedule_set", Sched: sched, By: "ann"}},
		{&scheduleGetReq{scheduleRef: scheduleRef{ID: "s1"}}, previousRequest{Op: "schedule", Group: "s1"}},
		{&scheduleDeleteReq{scheduleRef: ref}, previousRequest{Op: "schedule_delete", Group: "s1", By: "ann"}},
		{&schedulePauseReq{scheduleRef: ref}, previousRequest{Op: "schedule_pause", Group: "s1", By: "ann"}},
		{&scheduleResumeReq{scheduleRef: ref}, previousRequest{Op: "schedule_resume", Group: "s1", By: "ann"}},
		{&schedulesReq{}, previousRequest{Op: "schedules"}},
		{&triggerReq{scheduleRef: ref, Tag: "t"}, previousRequest{Op: "schedule_trigger", Group: "s1", By: "ann", Tag: "t"}},
	} {
		c.old.V, c.old.Trace = 1, "00-trace"
		b, err := encodeCall(c.req, "00-trace")
		if err != nil {
			t.Fatal(err)
		}
		if got, want, ok := sameJSON(t, json.RawMessage(b), c.old); !ok {
			t.Errorf("%s: %s; the previous release writes %s", c.req.op(), got, want)
		}
		if c.req.head().Op != "" {
			t.Errorf("%s: encodeCall changed the request", c.req.op())
		}
		for _, b := range [][]byte{b, mustJSON(c.old)} {
			if hd, err := readHeader(b); err != nil || hd.Op != c.old.Op || hd.V != 1 {
				t.Errorf("readHeader(%s) = %+v, %v", b, hd, err)
			}
		}
		if _, ok := callServers[c.req.op()]; !ok {
			t.Errorf("no server for op %s", c.req.op())
		}
	}
	if hd, err := readHeader([]byte(`{"op":"task","v":1}`)); err != nil || hd.Op != "task" || hd.V != 1 {
		t.Errorf("readHeader of a reordered header = %+v, %v", hd, err)
	}
}

// TestAnswerWire: the typed answers are the previous release's answers.
func TestAnswerWire(t *testing.T) {
	tv := &shard.TaskView{ID: "g1.0"}
	sv := &shard.ScheduleView{Spec: shard.ScheduleSpec{ID: "s1"}}
	sub := &api.SubmitResult{Group: "g1", Created: true}
	fe := &shard.FieldError{Task: -1, Field: "key", Message: "used"}
	for _, c := range []struct {
		name     string
		ans, old any
	}{
		{"submit", submitAns{Submit: sub}, previousResponse{Submit: sub}},
		{"task", taskAns{Task: tv}, previousResponse{Task: tv}},
		{"events", eventsAns{Events: []shard.TaskEvent{{Type: shard.EvLeased}}}, previousResponse{Events: []shard.TaskEvent{{Type: shard.EvLeased}}}},
		{"schedule", scheduleAns{Schedule: sv, Created: true}, previousResponse{Schedule: sv, Created: true}},
		{"trigger", triggerAns{Submit: sub, Schedule: sv}, previousResponse{Submit: sub, Schedule: sv}},
		{"workers", workersAns{Workers: []api.WorkerInfo{{ID: "w"}}}, previousResponse{Workers: []api.WorkerInfo{{ID: "w"}}}},
		{"error", taskAns{rpcError: rpcError{Err: "conflict", Msg: "key: used", Field: fe}}, previousResponse{Err: "conflict", Msg: "key: used", Field: fe}},
	} {
		if got, want, ok := sameJSON(t, c.ans, c.old); !ok {
			t.Errorf("%s: %s; the previous release writes %s", c.name, got, want)
		}
	}
}

// TestServeCallPreviousRelease: a peer of the previous release forwards
// requests in its encoding and reads the answers with its struct; a peer of
// this one serves them, errors included.
func TestServeCallPreviousRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2})
		ctx := t.Context()
		id := submitOne(t, mp.c, "echo", `7`)
		if _, err := mp.c.GetTask(ctx, id, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		ask := func(req previousRequest) previousResponse {
			t.Helper()
			req.V = 1
			b, err := mp.p.serveCall(ctx, "old", mustJSON(req))
			if err != nil {
				t.Fatalf("serveCall(%+v): %v", req, err)
			}
			var resp previousResponse
			if err := json.Unmarshal(b, &resp); err != nil {
				t.Fatal(err)
			}
			return resp
		}
		if r := ask(previousRequest{Op: "task", Task: shard.TaskID(id)}); r.Err != "" || r.Task == nil || string(r.Task.Result) != "7" {
			t.Errorf("task = %+v", r)
		}
		if r := ask(previousRequest{Op: "task", Task: "gnope.0"}); r.Err != "not_found" {
			t.Errorf("unknown task = %+v; want not_found", r)
		}
		if r := ask(previousRequest{Op: "retry", Group: shard.TaskID(id).Group(), Task: shard.TaskID(id)}); r.Err != "conflict" || r.Msg == "" {
			t.Errorf("retry of a SUCCEEDED task = %+v; want conflict", r)
		}
		if _, err := mp.p.serveCall(ctx, "old", []byte(`{"v":1,"op":"nonsense"}`)); err == nil {
			t.Error("an unknown op was served")
		}
	})
}

// BenchmarkForwardSubmit encodes a submission of 100 tasks as a forwarded
// request and decodes it as its owner does: the previous release's one
// struct, and the typed request with its header read first.
func BenchmarkForwardSubmit(b *testing.B) {
	spec := &shard.GroupSpec{ID: "g1", Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for i := range 100 {
		spec.Tasks = append(spec.Tasks, shard.TaskSpec{Name: fmt.Sprint("t", i), Handler: "echo", Payload: []byte(`{"n":12345,"s":"some payload text"}`)})
	}
	b.Run("previous", func(b *testing.B) {
		for b.Loop() {
			data, _ := json.Marshal(previousRequest{V: 1, Op: "submit", Spec: spec, Trace: spec.Trace})
			var r previousRequest
			if err := json.Unmarshal(data, &r); err != nil || r.Op != "submit" {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed", func(b *testing.B) {
		for b.Loop() {
			data, _ := encodeCall(&submitReq{Spec: spec}, spec.Trace)
			h, err := readHeader(data)
			var r submitReq
			if err != nil || h.Op != "submit" || json.Unmarshal(data, &r) != nil {
				b.Fatal(err)
			}
		}
	})
}
