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

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/webhook"
	"github.com/needle-mesh/needle/shard"
)

// TestNotifierDeliver: the runtime sends the group as the API shows it,
// under the webhook-id of the group as it ended (the same for every
// attempt, another once the group ends again), and a URL off the list is
// refused without a call.
func TestNotifierDeliver(t *testing.T) {
	type call struct {
		h    http.Header
		body string
	}
	calls := make(chan call, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls <- call{r.Header, string(body)}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	sender, err := webhook.New(NotifyConfig{Allow: []string{srv.URL + "/hook"}, Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	nt := newNotifier(sender, 4, prometheus.NewRegistry())
	job := node.NotifyJob{NotifyJob: shard.NotifyJob{Group: "g1", URL: srv.URL + "/hook", Attempt: 3},
		Group: shard.GroupView{ID: "g1", Mode: shard.ModeSingle, State: shard.GroupSucceeded, FinishedAt: time.Unix(5, 0)}}
	ctx := context.Background()
	if o := nt.deliver(ctx, job); o.Err != "" || o.Refused || o.job != job.NotifyJob {
		t.Fatalf("deliver = %+v", o)
	}
	c := <-calls
	if c.h.Get(webhook.HeaderID) != "g1_5000000000" || c.h.Get(webhook.HeaderAttempt) != "3" {
		t.Fatalf("headers %v", c.h)
	}
	if !strings.Contains(c.body, `"id":"g1"`) || !strings.Contains(c.body, `"state":"SUCCEEDED"`) {
		t.Fatalf("body = %s", c.body)
	}
	job.Group.FinishedAt = time.Unix(9, 0) // retried, ended again
	if o := nt.deliver(ctx, job); o.Err != "" {
		t.Fatalf("deliver = %+v", o)
	}
	if c := <-calls; c.h.Get(webhook.HeaderID) != "g1_9000000000" {
		t.Fatalf("the group ended again: webhook-id %s; want g1_9000000000", c.h.Get(webhook.HeaderID))
	}
	job.URL = "https://elsewhere.example/"
	if o := nt.deliver(ctx, job); !o.Refused || !strings.Contains(o.Err, "not under an allowed prefix") {
		t.Fatalf("off-list = %+v", o)
	}
}
