package peer

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// post sends body to path on c's peer and returns the status and body.
func post(t *testing.T, c *api.Client, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(c.BaseURL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestPeerKeyReuse: the same request with the same key answers 200 with
// the first ids; a different request with that key is a 409 naming key,
// whether its task count matches or not, and creates nothing.
func TestPeerKeyReuse(t *testing.T) {
	_, c, _ := startPeer(t, t.TempDir(), 2)
	first := `{"handler":"echo","payload":{"a":1},"key":"k1"}`
	code, created := post(t, c, "/v1/tasks", first)
	if code != http.StatusCreated {
		t.Fatalf("first submit = %d %s; want 201", code, created)
	}
	if code, again := post(t, c, "/v1/tasks", first); code != http.StatusOK || again != created {
		t.Errorf("repeat = %d %s; want 200 %s", code, again, created)
	}
	for _, body := range []struct{ path, body string }{
		{"/v1/tasks", `{"handler":"echo","payload":{"a":2},"key":"k1"}`},
		{"/v1/groups", `{"mode":"parallel","key":"k1","tasks":[{"handler":"echo"},{"handler":"echo"}]}`},
	} {
		code, got := post(t, c, body.path, body.body)
		var eb api.ErrorBody
		if err := json.Unmarshal([]byte(got), &eb); err != nil || eb.Error == nil {
			t.Fatalf("%s %s = %d %s; want an error body", body.path, body.body, code, got)
		}
		if code != http.StatusConflict || eb.Error.Code != api.CodeConflict || eb.Error.Field != "key" {
			t.Errorf("%s %s = %d %+v; want 409 conflict naming key", body.path, body.body, code, eb.Error)
		}
	}
	var res api.SubmitTaskResponse
	_ = json.Unmarshal([]byte(created), &res)
	g, err := c.GetGroup(t.Context(), res.Group, 10*time.Second)
	if err != nil || len(g.Tasks) != 1 || string(g.Tasks[0].Result) != `{"a":1}` {
		t.Errorf("group after the conflicts = %+v, %v; want the first request's one task", g, err)
	}
}
