package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/needle-mesh/needle/cmd/internal/buildinfo"
)

func TestDrainCommand(t *testing.T) {
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/drain", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"draining":true}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	runCLI(t, srv.URL, "", "drain").check(t, 0, "draining", "")
	if got := calls.Load(); got != 1 {
		t.Errorf("POST /v1/drain calls = %d; want 1", got)
	}
	if r := runCLI(t, srv.URL, "", "drain", "extra"); r.code != 2 {
		t.Errorf("drain extra: exit %d; want 2 (usage)", r.code)
	}
}

// TestHelpDescribesEveryCommand: `needle --help` lists every command of
// the table with a one-line description.
func TestHelpDescribesEveryCommand(t *testing.T) {
	r := runCLI(t, "http://127.0.0.1:1", "", "--help")
	if r.code != 0 {
		t.Fatalf("needle --help: exit %d", r.code)
	}
	for name := range commands {
		var line string
		for l := range strings.Lines(r.stdout) {
			if f := strings.Fields(l); len(f) > 0 && f[0] == name {
				line = strings.TrimSpace(l)
			}
		}
		if len(strings.Fields(line)) < 3 {
			t.Errorf("needle --help lists %q as %q; want the name and a one-line description "+
				"(add it to summaries in cmd/needle/main.go)", name, line)
		}
	}
}

func TestVersion(t *testing.T) {
	want := "needle " + buildinfo.Get().String() + "\n"
	runCLI(t, "http://127.0.0.1:1", "", "--version").check(t, 0, want, "")
}

// needle peers shows each peer's build version, "unknown" for a peer of
// an older release (its heartbeats name none: "" in the JSON).
func TestPeersVersionColumn(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/peers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"self":"p1","peers":[
			{"id":"p1","addrs":[],"state":"alive","load":{"ready":0,"running":0,"slots":4,"stranded":0},"last_seen":"2026-01-01T00:00:00Z","labels":[],"version":"v1.4.0"},
			{"id":"p2","addrs":[],"state":"alive","load":{"ready":0,"running":0,"slots":4,"stranded":0},"last_seen":"2026-01-01T00:00:00Z","labels":[],"version":""}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r := runCLI(t, srv.URL, "", "peers")
	r.check(t, 0, "VERSION", "")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("needle peers printed %q; want a header and two peers", r.stdout)
	}
	for i, want := range []string{"VERSION", "v1.4.0", "unknown"} {
		if f := strings.Fields(strings.Replace(lines[i], " (self)", "", 1)); len(f) < 3 || f[2] != want {
			t.Errorf("needle peers line %q: third column %v; want %s", lines[i], f, want)
		}
	}
}

// needle peers marks a peer heard as two live processes (a copied data
// dir: "conflict" in the JSON) in its state column.
func TestPeersConflictState(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/peers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"self":"p1","peers":[
			{"id":"p1","addrs":[],"state":"alive","load":{"ready":0,"running":0,"slots":4,"stranded":0},"last_seen":"2026-01-01T00:00:00Z","labels":[],"version":"v1.4.0"},
			{"id":"p2","addrs":[],"state":"alive","load":{"ready":0,"running":0,"slots":4,"stranded":0},"last_seen":"2026-01-01T00:00:00Z","labels":[],"version":"v1.4.0","conflict":true}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r := runCLI(t, srv.URL, "", "peers")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("needle peers printed %q; want a header and two peers", r.stdout)
	}
	for i, want := range []string{"STATE", "alive", "alive,conflict"} {
		if f := strings.Fields(strings.Replace(lines[i], " (self)", "", 1)); len(f) < 2 || f[1] != want {
			t.Errorf("needle peers line %q: state %v; want %s", lines[i], f, want)
		}
	}
}
