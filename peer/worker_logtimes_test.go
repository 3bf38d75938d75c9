package peer

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// A worker's log line is at the time the worker says its handler wrote it
// (it was at its arrival: a short task's lines all carried its end),
// within the lease's span: a time ahead of the peer's clock is the
// arrival, one before the lease was handed out the hand-out; a line
// without a time (an older worker) is at its arrival; a malformed time is
// a 400 naming it.
func TestWorkerLogLineTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := startMemPeer(t, newMemNet(), "solo", Config{Slots: 1, Logger: slog.New(slog.DiscardHandler)})
		c := mp.c
		id := submitTask(t, c, `{"handler": "resize"}`)
		granted := time.Now()
		tasks := poll(t, c, "w1", `"resize"`, 1, "10s")
		if len(tasks) != 1 || tasks[0].ID != id {
			t.Fatalf("poll = %+v; want %s", tasks, id)
		}
		lease := tasks[0].Lease
		wrote := granted.Add(2 * time.Second)
		time.Sleep(5 * time.Second) // the lines arrive later than the handler wrote them (within --worker-ttl)
		arrived := time.Now()
		rfc := func(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }
		body := fmt.Sprintf(`{"lines": [{"text": "wrote", "at": %q}, {"text": "ahead", "at": %q}, {"text": "before", "at": %q}, "plain"]}`,
			rfc(wrote), rfc(arrived.Add(time.Hour)), rfc(granted.Add(-time.Hour)))
		if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/logs", body); status != 200 {
			t.Fatalf("logs = %d %s", status, data)
		}
		for _, bad := range []struct{ body, field string }{
			{`{"lines": ["a", {"text": "b", "at": "yesterday"}]}`, "lines[1].at"},
			{`{"lines": [{"at": "2026-01-02T03:04:05Z"}]}`, "lines[0].text"},
			{`{"lines": [7]}`, "lines[0]"},
			{`{"lines": [{"text": "x", "when": "now"}]}`, "lines[0].when"},
		} {
			if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/logs", bad.body); status != 400 || !fieldIs(data, bad.field) {
				t.Errorf("logs %s = %d %s; want 400 naming %s", bad.body, status, data, bad.field)
			}
		}
		logs, err := c.TaskLogs(t.Context(), id, 0)
		if err != nil || len(logs.Lines) != 4 {
			t.Fatalf("logs = %+v, %v; want the 4 lines taken", logs, err)
		}
		for i, want := range []time.Time{wrote, arrived, granted, arrived} {
			if got := logs.Lines[i]; !got.At.Equal(want) {
				t.Errorf("line %q at %v; want %v", got.Text, got.At, want)
			}
		}
	})
}

// fieldIs reports whether data is an error body naming field.
func fieldIs(data []byte, field string) bool {
	var eb api.ErrorBody
	return json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Field == field
}
