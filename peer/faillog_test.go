package peer

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/internal/syncbuf"
)

// TestHandlerFailureLogged: a failed attempt is a warn line carrying the
// task's and the group's ids, the handler and its error.
func TestHandlerFailureLogged(t *testing.T) { synctest.Test(t, testHandlerFailureLogged) }

func testHandlerFailureLogged(t *testing.T) {
	var buf syncbuf.Buffer
	c := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}).c
	g, tasks := runGroup(t, c, `{"mode":"parallel","tasks":[{"name":"boom","handler":"fail","payload":{"permanent":true,"message":"disk on fire"}}]}`)
	if g.State != "FAILED" {
		t.Fatalf("group %s; want FAILED", g.State)
	}
	task := tasks["boom"]
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "handler failed") {
			line = l
		}
	}
	for _, want := range []string{"level=WARN", "task=" + task.ID, "group=" + g.ID, "handler=fail", `err="disk on fire"`, "permanent=true"} {
		if !strings.Contains(line, want) {
			t.Fatalf("log line %q lacks %q; log:\n%s", line, want, buf.String())
		}
	}
}

// TestFailLogRateLimited: at most failLogBurst lines per window; the next
// line logged reports how many were suppressed.
func TestFailLogRateLimited(t *testing.T) {
	var f failLog
	t0 := time.Unix(1_000_000, 0)
	logged := 0
	for i := range 25 {
		if ok, _ := f.allow(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			logged++
		}
	}
	if logged != failLogBurst {
		t.Fatalf("logged %d of 25 in one window; want %d", logged, failLogBurst)
	}
	ok, dropped := f.allow(t0.Add(failLogWindow))
	if !ok || dropped != 25-failLogBurst {
		t.Fatalf("next window: allow = %v, suppressed %d; want true, %d", ok, dropped, 25-failLogBurst)
	}
}
