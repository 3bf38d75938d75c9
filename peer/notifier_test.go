package peer

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/needle-mesh/needle/shard"
)

func newTestNotifier(t *testing.T, allow ...string) *notifier {
	t.Helper()
	cfg := NotifyConfig{Allow: allow, Secret: "s3cret"}
	prefixes, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	return newNotifier(cfg, prefixes, prometheus.NewRegistry())
}

func TestNotifyConfigValidate(t *testing.T) {
	for _, c := range []NotifyConfig{
		{Allow: []string{"https://h/"}},                           // no secret
		{Allow: []string{"ftp://h/"}, Secret: "x"},                // scheme
		{Allow: []string{"https://h/?q=1"}, Secret: "x"},          // query
		{Allow: []string{"https://u:p@h/"}, Secret: "x"},          // userinfo
		{Allow: []string{"https://h/"}, Secret: "x", Timeout: -1}, // timeout
	} {
		if _, err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil; want an error", c)
		}
	}
}

func TestNotifierCheck(t *testing.T) {
	nt := newTestNotifier(t, "https://hooks.example/needle", "http://127.0.0.1:8080/")
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example/needle", true},
		{"https://hooks.example/needle/a?x=1", true},
		{"https://HOOKS.example:443/needle/b", true},
		{"https://hooks.example/needles", false},
		{"https://hooks.example/needle/../admin", false},
		{"http://hooks.example/needle", false},
		{"http://127.0.0.1:8080/anything", true},
		{"http://127.0.0.1:8081/", false},
		{"https://user@hooks.example/needle", false},
		{"mailto:x@y", false},
	} {
		if err := nt.check(tt.url); (err == nil) != tt.ok {
			t.Errorf("check(%q) = %v; want ok=%v", tt.url, err, tt.ok)
		}
	}
	if err := newTestNotifier(t).check("https://hooks.example/needle"); err == nil || !strings.Contains(err.Error(), "allow-list") {
		t.Errorf("no allow-list: %v", err)
	}
}

// A delivery carries the group, its id and attempt, and a signature over
// the exact body; a non-2xx is a failure quoting the status; a URL off
// this peer's list is refused without a call.
func TestNotifierDeliver(t *testing.T) {
	var got *http.Request
	var body []byte
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(status)
		_, _ = w.Write([]byte("nope"))
	}))
	defer srv.Close()
	nt := newTestNotifier(t, srv.URL+"/hook")
	job := NotifyJob{NotifyJob: shard.NotifyJob{Group: "g1", URL: srv.URL + "/hook?token=abc", Attempt: 3},
		Group: shard.GroupView{ID: "g1", Mode: shard.ModeSingle, State: shard.GroupSucceeded, FinishedAt: time.Unix(5, 0)}}
	ctx := context.Background()
	o := nt.deliver(ctx, job)
	if o.err != "" || o.refused {
		t.Fatalf("deliver = %+v", o)
	}
	if got.Header.Get(HeaderDelivery) != "g1" || got.Header.Get(HeaderAttempt) != "3" ||
		got.Header.Get("Content-Type") != "application/json" || got.URL.Query().Get("token") != "abc" {
		t.Fatalf("headers %v, url %v", got.Header, got.URL)
	}
	if sig := got.Header.Get(HeaderSignature); sig != Signature([]byte("s3cret"), body) || !strings.HasPrefix(sig, "sha256=") {
		t.Fatalf("signature %q does not verify", sig)
	}
	if !strings.Contains(string(body), `"id":"g1"`) || !strings.Contains(string(body), `"state":"SUCCEEDED"`) {
		t.Fatalf("body = %s", body)
	}
	status = http.StatusInternalServerError
	if o := nt.deliver(ctx, job); o.refused || !strings.Contains(o.err, "status 500") || strings.Contains(o.err, "abc") {
		t.Fatalf("500 = %+v; want a failure quoting the status, not the query", o)
	}
	status = http.StatusGone
	if o := nt.deliver(ctx, job); !o.gone || o.refused || !strings.Contains(o.err, "status 410") {
		t.Fatalf("410 = %+v; want a failure that gives up", o)
	}
	other := newTestNotifier(t, "https://elsewhere.example/")
	got = nil
	if o := other.deliver(ctx, job); !o.refused || !strings.Contains(o.err, "not under an allowed prefix") || got != nil {
		t.Fatalf("off-list = %+v (called: %v)", o, got != nil)
	}
}

// TestNotifierSendsTheCheckedURL: an escaped ".." passes the allow-list
// only as the cleaned path, and the call goes to that path, not to the
// raw URL a server may decode elsewhere (/admin/..%2Fhooks/x).
func TestNotifierSendsTheCheckedURL(t *testing.T) {
	paths := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.EscapedPath()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	nt := newTestNotifier(t, srv.URL+"/hooks")
	job := NotifyJob{NotifyJob: shard.NotifyJob{Group: "g1", URL: srv.URL + "/admin/..%2Fhooks/x", Attempt: 1},
		Group: shard.GroupView{ID: "g1", Mode: shard.ModeSingle, State: shard.GroupSucceeded}}
	if o := nt.deliver(context.Background(), job); o.err != "" {
		t.Fatalf("deliver = %+v", o)
	}
	if got := <-paths; got != "/hooks/x" {
		t.Fatalf("the webhook went to %q; want the checked path /hooks/x", got)
	}
}
