package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// TestRetryRealPeer: a dag whose first task fails permanently is retried
// through the API; the task runs again (attempt 2) and succeeds, its
// canceled dependent runs, the group succeeds, both say one retry; the retry is audited, a
// repeated key does nothing, and refusals name the state or the id.
func TestRetryRealPeer(t *testing.T) {
	p, c, _ := startPeer(t, t.TempDir(), 2)
	var broken atomic.Bool
	broken.Store(true)
	if err := p.Handlers().Register("flaky", func(ctx context.Context, call Call) ([]byte, error) {
		if broken.Load() {
			return nil, Permanent(errors.New("disk full"))
		}
		return []byte(`"ok"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := c.SubmitGroupJSON(ctx, []byte(`{"mode":"dag","tasks":[{"name":"a","handler":"flaky"},{"name":"b","handler":"echo","deps":["a"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.GetGroup(ctx, res.Group, 10*time.Second)
	if err != nil || g.State != "FAILED" {
		t.Fatalf("group = %+v, %v; want FAILED", g, err)
	}
	a, b := res.Tasks["a"], res.Tasks["b"]
	assertAPIError(t, "retry of b (its dependency failed)", func() error { _, err := c.RetryTask(ctx, b, ""); return err }, http.StatusConflict, "")
	broken.Store(false)
	if tk, err := c.RetryTask(ctx, a, "fix-1"); err != nil || tk.Repeat {
		t.Fatalf("first retry with key fix-1 = %+v, %v; want done, not a repeat", tk, err)
	}
	g, err = c.GetGroup(ctx, res.Group, 10*time.Second)
	if err != nil || g.State != "SUCCEEDED" || g.Tasks[0].Attempt != 2 {
		t.Fatalf("group after retry = %+v, %v; want SUCCEEDED, a at attempt 2", g, err)
	}
	// Both were re-armed by the one retry (b was canceled with a).
	if g.Tasks[0].Retries != 1 || g.Tasks[1].Retries != 1 {
		t.Fatalf("retries after one retry: a %d, b %d; want 1 each", g.Tasks[0].Retries, g.Tasks[1].Retries)
	}
	if tk, err := c.RetryTask(ctx, a, "fix-1"); err != nil || tk.State != "SUCCEEDED" || !tk.Repeat {
		t.Fatalf("repeated key = %+v, %v; want the current state, nothing done, and repeat", tk, err)
	}
	assertAPIError(t, "retry of a SUCCEEDED task", func() error { _, err := c.RetryTask(ctx, a, ""); return err }, http.StatusConflict, "SUCCEEDED")
	assertAPIError(t, "retry of a SUCCEEDED group", func() error { _, err := c.RetryGroup(ctx, res.Group, ""); return err }, http.StatusConflict, "SUCCEEDED")
	assertAPIError(t, "retry of an unknown task", func() error { _, err := c.RetryTask(ctx, res.Group+".7", ""); return err }, http.StatusNotFound, "")
	resp, err := http.Post("http://"+p.Addr()+"/v1/tasks/"+a+"/retry", "application/json", strings.NewReader(`{"kye":"x"}`))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("retry with an unknown field: %v %v; want 400", resp.Status, err)
	}
	resp.Body.Close()
	var audit struct {
		Entries []struct{ Action, Subject string }
	}
	resp, err = http.Get("http://" + p.Addr() + "/v1/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Action != "retried" || audit.Entries[0].Subject != a {
		t.Fatalf("audit = %+v; want one retried %s", audit.Entries, a)
	}
}

func assertAPIError(t *testing.T, what string, f func() error, status int, says string) {
	t.Helper()
	err := f()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != status || !strings.Contains(ae.Message, says) {
		t.Errorf("%s: %v; want %d saying %q", what, err, status, says)
	}
}
