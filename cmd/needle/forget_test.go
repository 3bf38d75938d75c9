package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// needle forget sends the peer's id, and --force and --unsafe-recover as
// the parameters of POST /v1/peers/{id}/forget; --unsafe-recover says
// what it did.
func TestForgetCommand(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/peers/{id}/forget", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.PathValue("id")+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"forgotten":"` + r.PathValue("id") + `","audited":true}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	runCLI(t, srv.URL, "", "forget", "p1").check(t, 0, "forgot p1\n", "")
	runCLI(t, srv.URL, "", "forget", "--force", "p2").check(t, 0, "forgot p2\n", "")
	runCLI(t, srv.URL, "", "forget", "--unsafe-recover", "p3").check(t, 0,
		"forgot p3; its disk is declared lost: partitions left without a majority recover from their last voter\n", "")
	runCLI(t, srv.URL, "", "forget", "--force", "--unsafe-recover", "p4").check(t, 0,
		"forgot p4; its disk is declared lost: partitions left without a majority recover from their last voter\n", "")
	want := []string{"p1?", "p2?force=true", "p3?unsafe_recover=true", "p4?force=true&unsafe_recover=true"}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != len(want) {
		t.Fatalf("requests %q; want %q", queries, want)
	}
	for i := range want {
		if queries[i] != want[i] {
			t.Errorf("request %d = %q; want %q", i, queries[i], want[i])
		}
	}
	if r := runCLI(t, srv.URL, "", "forget", "--unsafe-recover"); r.code != 2 {
		t.Errorf("forget --unsafe-recover without an id: exit %d; want 2 (usage)", r.code)
	}
}
