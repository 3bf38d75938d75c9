package peer

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// scrape returns the peer's /metrics text.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUserMetrics: handler outcomes by handler and result, tasks
// submitted, and HTTP requests by route and code are exported, with the
// handler and route series present before anything happened.
func TestUserMetrics(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	before := scrape(t, c.BaseURL)
	for _, want := range []string{
		`needle_handler_outcomes_total{handler="fail",result="failed"} 0`,
		`needle_handler_outcomes_total{handler="echo",result="succeeded"} 0`,
		`needle_tasks_submitted_total 0`,
		`needle_http_request_seconds_count{route="POST /v1/tasks"} 0`,
	} {
		if !strings.Contains(before, want) {
			t.Errorf("before any task, /metrics lacks %s", want)
		}
	}
	g, _ := runGroup(t, c, `{"mode":"parallel","tasks":[{"name":"a","handler":"echo","payload":1},{"name":"b","handler":"fail","payload":{"permanent":true}}]}`)
	if g.State != "FAILED" {
		t.Fatalf("group %s; want FAILED", g.State)
	}
	after := scrape(t, c.BaseURL)
	for _, want := range []string{
		`needle_handler_outcomes_total{handler="fail",result="failed"} 1`,
		`needle_handler_outcomes_total{handler="echo",result="succeeded"} 1`,
		`needle_tasks_submitted_total 2`,
		`needle_http_requests_total{code="201",route="POST /v1/groups"} 1`,
		`needle_http_request_seconds_count{route="POST /v1/groups"} 1`,
	} {
		if !strings.Contains(after, want) {
			t.Errorf("after one group, /metrics lacks %s", want)
		}
	}
}
