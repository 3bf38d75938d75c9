package peer

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// A group's concurrency holds its tasks to that many at once on a peer
// with more free slots: the others wait PENDING, and each one let in
// follows a task that finished. Bad values are a 400 naming the field,
// and leave no group behind.
func TestGroupConcurrencyAPI(t *testing.T) {
	p, c := startPeerWith(t, Config{Slots: 4})
	var mu sync.Mutex
	running, most := 0, 0
	started := make(chan string, 6)
	release := make(chan struct{}, 6)
	err := p.Handlers().Register("gate", func(ctx context.Context, call Call) ([]byte, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		started <- string(call.Task)
		select {
		case <-release:
			return []byte("1"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := c.SubmitGroupJSON(ctx, []byte(`{"mode": "parallel", "concurrency": 2, "tasks": [
		{"handler": "gate"}, {"handler": "gate"}, {"handler": "gate"},
		{"handler": "gate"}, {"handler": "gate"}, {"handler": "gate"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	first := []string{<-started, <-started}
	g, err := c.GetGroup(ctx, res.Group, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Concurrency != 2 || g.Counts["PENDING"] != 4 {
		t.Fatalf("with %v running: concurrency %d, counts %v; want 2 and 4 PENDING", first, g.Concurrency, g.Counts)
	}
	for i := range 6 {
		release <- struct{}{}
		if i < 4 {
			<-started // each task that finishes lets one more in
		}
	}
	if g, err = c.GetGroup(ctx, res.Group, 10*time.Second); err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("group %+v, %v; want SUCCEEDED", g, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Errorf("%d tasks ran at once; want 2", most)
	}

	before, err := c.ListGroups(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"mode": "parallel", "concurrency": -1, "tasks": [{"handler": "echo"}]}`,
		`{"mode": "parallel", "concurrency": "2", "tasks": [{"handler": "echo"}]}`,
		`{"mode": "parallel", "concurrency": 2.5, "tasks": [{"handler": "echo"}]}`,
		`{"mode": "pipeline", "concurrency": 1, "stages": [{"name": "s", "handler": "echo"}], "items": [1]}`,
	} {
		_, err := c.SubmitGroupJSON(ctx, []byte(body))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "concurrency" {
			t.Errorf("%s: %v; want 400 naming concurrency", body, err)
		}
	}
	after, err := c.ListGroups(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Groups) != len(before.Groups) {
		t.Errorf("%d groups after refused submissions; %d before", len(after.Groups), len(before.Groups))
	}
}

// A schedule's group keeps its concurrency: each firing is bounded alike.
func TestScheduleGroupConcurrency(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	ctx := t.Context()
	s, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "capped", Every: "1h",
		Group: []byte(`{"mode": "parallel", "concurrency": 1, "tasks": [{"handler": "echo", "payload": 1}, {"handler": "echo", "payload": 2}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.TriggerSchedule(ctx, s.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.GetGroup(ctx, tr.Group, 10*time.Second)
	if err != nil || g.State != "SUCCEEDED" || g.Concurrency != 1 {
		t.Fatalf("the firing's group = %+v, %v; want SUCCEEDED with concurrency 1", g, err)
	}
	if _, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "bad", Every: "1h",
		Group: []byte(`{"mode": "parallel", "concurrency": -2, "tasks": [{"handler": "echo"}]}`)}); err == nil || !strings.Contains(err.Error(), "concurrency") {
		t.Fatalf("a schedule of concurrency -2 = %v; want a 400 naming concurrency", err)
	}
}
