package bench

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A task the soak leaves unfinished comes with its history, from the first
// peer that answers: what the log says happened to it is what the next
// person needs to find why.
func TestTaskHistoriesAskEachPeer(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"unavailable","message":"no leader"}}`, http.StatusServiceUnavailable)
	}))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/tasks/g1.0/events" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"events":[{"seq":1,"type":"submitted","at":"t0","round":0},` +
			`{"seq":2,"type":"leased","at":"t1","round":1,"peer":"p2"},{"seq":3,"type":"canceled","at":"t2","round":1,"by":"10.0.0.1"}]}`))
	}))
	defer up.Close()
	cl := &Cluster{}
	for _, s := range []*httptest.Server{down, up} {
		cl.peers = append(cl.peers, &clusterPeer{client: NewClient(strings.TrimPrefix(s.URL, "http://"), s.Client())})
	}
	got := taskHistories(t.Context(), cl, []string{"g1.0", "g2.0"})
	want := []string{
		`g1.0 #1 t0 submitted round 0 peer "" by "" error ""`,
		`g1.0 #2 t1 leased round 1 peer "p2" by "" error ""`,
		`g1.0 #3 t2 canceled round 1 peer "" by "10.0.0.1" error ""`,
	}
	if len(got) != 4 || strings.Join(got[:3], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(got[3], "g2.0: history: ") {
		t.Fatalf("histories:\n%s\nwant:\n%s\nand g2.0's error", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
