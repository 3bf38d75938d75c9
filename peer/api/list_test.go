package api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

func TestCursorRoundTrip(t *testing.T) {
	q := url.Values{"state": {"FAILED"}, "handler": {"h"}}
	lq, err := ParseListQuery(q, false)
	if err != nil {
		t.Fatal(err)
	}
	k := shard.ListKey{Created: time.Unix(1_700_000_000, 123).UTC(), Group: "g~1", Task: 7}
	q.Set("cursor", lq.Cursor(k))
	q.Set("limit", "3") // the limit may change between pages
	lq2, err := ParseListQuery(q, false)
	if err != nil || lq2.Filter.After == nil || *lq2.Filter.After != k {
		t.Fatalf("cursor decoded to %+v, %v; want %+v", lq2.Filter.After, err, k)
	}
	q.Set("handler", "other")
	if _, err := ParseListQuery(q, false); !isField(err, "cursor") {
		t.Fatalf("cursor with other filters: %v; want a cursor error", err)
	}
	if _, err := ParseListQuery(url.Values{"cursor": {lq.Cursor(k)}}, true); !isField(err, "cursor") {
		t.Fatalf("task cursor on the group list: %v; want a cursor error", err)
	}
}

func TestListWorkerDeathsParam(t *testing.T) {
	lq, err := ParseListQuery(url.Values{"worker_deaths": {"2"}}, false)
	if err != nil || lq.Filter.WorkerDeaths != 2 {
		t.Fatalf("worker_deaths=2: %+v, %v", lq.Filter, err)
	}
	for _, bad := range []string{"0", "-1", "x", "1.5", "67", ""} {
		q := url.Values{"worker_deaths": {bad}}
		if bad == "" {
			q["worker_deaths"] = []string{"1", "2"}
		}
		if _, err := ParseListQuery(q, true); !isField(err, "worker_deaths") {
			t.Errorf("worker_deaths=%q: %v; want a 400 naming worker_deaths", bad, err)
		}
	}
}

func isField(err error, field string) bool {
	var fe *FieldError
	return errors.As(err, &fe) && fe.Field == field
}

func FuzzListQuery(f *testing.F) {
	lq, _ := ParseListQuery(url.Values{}, false)
	f.Add("cursor=" + lq.Cursor(shard.ListKey{Created: time.Unix(5, 0), Group: "g", Task: 1}))
	f.Add("state=FAILED&state=READY,running&limit=10&created_after=2026-01-02T15:04:05Z")
	f.Add("label=a%3Db&q=x&mode=dag&cursor=AQ")
	f.Add("worker_deaths=2&state=RUNNING")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		for _, groups := range []bool{false, true} {
			lq, err := ParseListQuery(q, groups)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field == "" {
					t.Fatalf("ParseListQuery(%q) error %v; want a *FieldError naming a field", raw, err)
				}
				continue
			}
			if lq.Filter.Limit < 1 || lq.Filter.Limit > MaxListLimit {
				t.Fatalf("limit %d out of range", lq.Filter.Limit)
			}
			if d := lq.Filter.WorkerDeaths; d < 0 || d > shard.MaxDeaths {
				t.Fatalf("worker_deaths %d out of range", d)
			}
		}
	})
}

// An unknown state is echoed as sent, not upper-cased (`bogus` answered
// `unknown state "BOGUS"`); a known one matches in any case.
func TestListStateEchoedAsSent(t *testing.T) {
	for _, groups := range []bool{false, true} {
		_, err := ParseListQuery(url.Values{"state": {"failed, bogus"}}, groups)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "state" || !strings.Contains(fe.Message, `"bogus"`) {
			t.Errorf("groups=%v: state=failed,bogus: %v; want a 400 naming state and echoing \"bogus\"", groups, err)
		}
	}
	if lq, err := ParseListQuery(url.Values{"state": {"Failed"}}, false); err != nil || len(lq.Filter.States) != 1 || lq.Filter.States[0] != shard.Failed {
		t.Errorf("state=Failed: %+v, %v; want FAILED", lq.Filter.States, err)
	}
}

// An unknown parameter names itself and what the route takes, on a route
// whose handler reads no list (GET /v1/tasks/{id}?foo=1 answered 200).
func TestUnknownParamOnTaskRoute(t *testing.T) {
	srv := httptest.NewServer(NewHandler(&fakeBackend{}, HandlerOptions{}))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/v1/tasks/g1.0?foo=1": `"message":"foo: unknown parameter (want wait)","field":"foo"`,
		"/v1/groups/g1?foo=1":  `"message":"foo: unknown parameter (want wait, tasks)","field":"foo"`,
		"/healthz?foo=1":       `"message":"foo: unknown parameter (GET /healthz takes none)","field":"foo"`,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s = %d %s; want 400 with %s", path, resp.StatusCode, b, want)
		}
	}
}
