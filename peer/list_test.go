package peer

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// TestListAcrossMesh lists the failed tasks of a 3-peer mesh page by
// page through a peer, and checks bad queries are refused naming the field.
func TestListAcrossMesh(t *testing.T) { synctest.Test(t, testListAcrossMesh) }

func testListAcrossMesh(t *testing.T) {
	_, peers := startMemMesh(t, 3, 32)
	ctx := t.Context()
	var failed, all []string
	for i := range 12 {
		handler, payload := "echo", fmt.Sprint(i)
		if i%3 == 0 {
			handler, payload = "fail", `{"permanent":true,"message":"boom"}`
		}
		body := fmt.Sprintf(`{"mode":"parallel","key":"list-%d","tasks":[{"name":"n%d","handler":%q,"payload":%s}]}`, i, i, handler, payload)
		time.Sleep(time.Millisecond) // the virtual clock: each submission a moment after the last, so newest-first is one order
		res := submitRetrying(t, peers[i%3].c, body)
		if _, err := peers[0].c.GetGroup(ctx, res.Group, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		id := res.Tasks["n"+fmt.Sprint(i)]
		all = append(all, id)
		if handler == "fail" {
			failed = append(failed, id)
		}
	}
	slices.Reverse(failed)
	var got []string
	q := url.Values{"state": {"FAILED"}, "limit": {"2"}}
	for page := 0; ; page++ {
		l, err := peers[1].c.ListTasks(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.MissingPartitions) > 0 {
			t.Fatalf("missing partitions %v in a healthy mesh", l.MissingPartitions)
		}
		for _, tk := range l.Tasks {
			if tk.State != "FAILED" || tk.Error == nil {
				t.Errorf("listed %+v as FAILED", tk)
			}
			got = append(got, tk.ID)
		}
		if l.Cursor == "" {
			break
		}
		q.Set("cursor", l.Cursor)
	}
	if !slices.Equal(got, failed) {
		t.Errorf("failed tasks paged = %v; want %v (newest first)", got, failed)
	}
	l, err := peers[2].c.ListTasks(ctx, url.Values{"q": {"list-"}, "limit": {"1000"}})
	if err != nil || len(l.Tasks) != len(all) {
		t.Fatalf("q=list- listed %d tasks, %v; want %d", len(l.Tasks), err, len(all))
	}
	gl, err := peers[0].c.ListGroups(ctx, url.Values{"state": {"FAILED"}})
	if err != nil || len(gl.Groups) != len(failed) {
		t.Fatalf("FAILED groups = %d, %v; want %d", len(gl.Groups), err, len(failed))
	}
	st, err := peers[2].c.Stats(ctx)
	if err != nil || st.Totals["FAILED"] != len(failed) || st.Totals["SUCCEEDED"] != len(all)-len(failed) {
		t.Fatalf("stats = %+v, %v", st, err)
	}
	assertListRefused(t, peers[0].c)
	for _, mp := range peers { // a retry through every peer: forwarded to the owner
		tk, err := mp.c.RetryTask(ctx, failed[0], "")
		if err != nil {
			t.Fatalf("retry %s: %v", failed[0], err)
		}
		g, err := mp.c.GetGroup(ctx, tk.Group, 10*time.Second)
		if err != nil || g.State != "FAILED" || g.Tasks[0].Attempt < 2 {
			t.Fatalf("group after retry = %+v, %v; want FAILED again with a new attempt", g, err)
		}
	}
	for i, mp := range peers { // a keyed retry through every peer: a repeat after the first
		tk, err := mp.c.RetryTask(ctx, failed[0], "k1")
		if err != nil || tk.Repeat != (i > 0) {
			t.Fatalf("p%d: retry %s with key k1 = %+v, %v; want repeat %v", i, failed[0], tk, err, i > 0)
		}
	}
}

func assertListRefused(t *testing.T, c *api.Client) {
	t.Helper()
	first, err := c.ListTasks(t.Context(), url.Values{"limit": {"1"}})
	if err != nil || first.Cursor == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	tampered := []byte(first.Cursor)
	tampered[len(tampered)/2] ^= 1
	for _, tt := range []struct {
		q     url.Values
		field string
	}{
		{url.Values{"state": {"DONE"}}, "state"},
		{url.Values{"colour": {"red"}}, "colour"},
		{url.Values{"limit": {"0"}}, "limit"},
		{url.Values{"limit": {"1001"}}, "limit"},
		{url.Values{"created_after": {"yesterday"}}, "created_after"},
		{url.Values{"mode": {"chain"}}, "mode"},
		{url.Values{"cursor": {string(tampered)}}, "cursor"},
		{url.Values{"cursor": {"%%%"}}, "cursor"},
		{url.Values{"cursor": {first.Cursor}, "state": {"FAILED"}}, "cursor"}, // another query's cursor
	} {
		_, err := c.ListTasks(t.Context(), tt.q)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tt.field {
			t.Errorf("ListTasks(%v) = %v; want 400 naming %s", tt.q, err, tt.field)
		}
	}
}

// TestListCursorFullPage: a full page carries a cursor even when nothing
// follows (the merged partitions' pages cannot tell), and the page after
// it is empty, without one; a page with fewer items has none
// (docs/openapi.yaml, TaskList.cursor).
func TestListCursorFullPage(t *testing.T) {
	_, c, _ := startPeer(t, t.TempDir(), 2)
	for range 2 {
		submitTask(t, c, `{"handler": "cursor-test", "payload": 1}`)
	}
	q := url.Values{"handler": {"cursor-test"}, "limit": {"2"}}
	l, err := c.ListTasks(t.Context(), q)
	if err != nil || len(l.Tasks) != 2 || l.Cursor == "" {
		t.Fatalf("full page = %+v, %v; want 2 tasks and a cursor", l, err)
	}
	q.Set("cursor", l.Cursor)
	if l, err = c.ListTasks(t.Context(), q); err != nil || len(l.Tasks) != 0 || l.Cursor != "" {
		t.Fatalf("page after the full one = %+v, %v; want empty, no cursor", l, err)
	}
	q.Del("cursor")
	q.Set("limit", "3")
	if l, err = c.ListTasks(t.Context(), q); err != nil || len(l.Tasks) != 2 || l.Cursor != "" {
		t.Fatalf("page under the limit = %+v, %v; want 2 tasks, no cursor", l, err)
	}
}
