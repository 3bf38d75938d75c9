package peer

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// POST /v1/drain and POST /v1/peers/{id}/forget take no body: one they do
// not understand is a 400 naming it, and the peer neither drains nor
// forgets. Before, any body was ignored: {"peer": "<another id>"} drained
// the peer asked, and {"force": true} (force is a query parameter) was
// dropped (audit s77, F1).
func TestDrainAndForgetRefuseABody(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	for _, tt := range []struct{ path, body, field string }{
		{"/v1/drain", `{"peer": "12D3KooWother"}`, "peer"},
		{"/v1/drain", `{bad`, ""},
		{"/v1/peers/12D3KooWother/forget", `{"force": true}`, "force"},
	} {
		status, data := wcall(t, c, "POST", tt.path, tt.body)
		var e api.ErrorBody
		if status != http.StatusBadRequest || json.Unmarshal(data, &e) != nil || e.Error == nil || e.Error.Field != tt.field {
			t.Errorf("POST %s %s = %d %s; want 400 naming %q", tt.path, tt.body, status, data, tt.field)
		}
	}
	select {
	case <-p.drainAsked:
		t.Fatal("a drain refused with a 400 drained the peer")
	default:
	}
	// No body, or {}, is taken as before (the Go client sends {}).
	status, data := wcall(t, c, "POST", "/v1/peers/12D3KooWAdGkj1x5oVYRbRhs9qhMfvZJjxGKr4BwjJyzVQF3jgGj/forget", "{}") // a peer id, of no member
	if status != http.StatusNotFound || !strings.Contains(string(data), "no member") {
		t.Errorf("POST forget {} = %d %s; want 404 no member", status, data)
	}
	if status, data := wcall(t, c, "POST", "/v1/drain", "{}"); status != http.StatusAccepted {
		t.Errorf("POST /v1/drain {} = %d %s; want 202", status, data)
	}
	select {
	case <-p.drainAsked:
	default:
		t.Error("POST /v1/drain {} did not ask for the drain")
	}
}

// A forget of an id that cannot be a peer's is a 400 naming id, as a
// malformed task or group id is, not a 404 "no member" (trial s82:
// needle forget nope said "no member nope").
func TestForgetMalformedID(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	for _, id := range []string{"nope", "12D3KooWother", "g3f1c9a0b1d2e3f4a5b6c7d8"} {
		status, data := wcall(t, c, "POST", "/v1/peers/"+id+"/forget", "")
		var e api.ErrorBody
		if status != http.StatusBadRequest || json.Unmarshal(data, &e) != nil || e.Error == nil || e.Error.Field != "id" ||
			!strings.Contains(e.Error.Message, "malformed peer id") {
			t.Errorf("POST forget %s = %d %s; want 400 naming id, malformed peer id", id, status, data)
		}
	}
	if status, data := wcall(t, c, "POST", "/v1/peers/12D3KooWAdGkj1x5oVYRbRhs9qhMfvZJjxGKr4BwjJyzVQF3jgGj/forget", ""); status != http.StatusNotFound {
		t.Errorf("POST forget of a peer id of no member = %d %s; want 404", status, data)
	}
}
