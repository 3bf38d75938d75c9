package peer

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// Every API route refuses an unknown query parameter with a 400 naming it
// (GET /v1/tasks/{id}, /v1/groups/{id}, /v1/audit and POST /v1/tasks
// answered ?foo=1 as if it were not there), and takes each parameter
// docs/openapi.yaml gives it. /metrics (Prometheus's), the dashboard and
// pprof are not the API and are left alone.
func TestEveryRouteRefusesUnknownParams(t *testing.T) {
	doc := loadSpec(t)
	ops := specOps(doc)
	p, c, _ := startPeer(t, t.TempDir(), 2)
	param := regexp.MustCompile(`\{[^}]*\}`)
	for _, pat := range p.routes().patterns {
		method, path, ok := strings.Cut(pat, " ")
		if !ok || !strings.HasPrefix(path, "/v1/") && path != "/healthz" {
			continue // the dashboard, pprof, /metrics
		}
		url := c.BaseURL + param.ReplaceAllString(path, "gx.0")
		status, e := send(t, method, url+"?bogus_param=1")
		if status != http.StatusBadRequest || e.Code != "invalid_argument" || e.Field != "bogus_param" || !strings.Contains(e.Message, "unknown parameter") {
			t.Errorf("%s?bogus_param=1 = %d %+v; want 400 invalid_argument naming bogus_param", pat, status, e)
		}
		// Each documented parameter is known (an empty value is no value).
		var op *openapi3.Operation
		if sp, ok := ops[servedKey(pat)]; ok {
			op = doc.Paths.Find(sp).GetOperation(method)
		}
		if op == nil {
			continue
		}
		for _, pr := range op.Parameters {
			if pr.Value.In != "query" {
				continue
			}
			if status, e := send(t, method, url+"?"+pr.Value.Name+"="); strings.Contains(e.Message, "unknown parameter") {
				t.Errorf("%s?%s= = %d %+v; a parameter docs/openapi.yaml documents is unknown", pat, pr.Value.Name, status, e)
			}
		}
	}
}

// send sends a request without a body and returns the status and the
// error of its answer, if any.
func send(t *testing.T, method, url string) (int, struct{ Code, Message, Field string }) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message, Field string }
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &body)
	}
	return resp.StatusCode, body.Error
}
