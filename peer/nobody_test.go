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
	status, data := wcall(t, c, "POST", "/v1/peers/12D3KooWother/forget", "{}")
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
