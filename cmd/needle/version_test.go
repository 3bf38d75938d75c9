package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/cmd/internal/buildinfo"
)

// needle version prints the CLI's version and its peer's: the self entry
// of GET /v1/peers, "unknown" for a peer too old to name its own.
func TestVersionCommand(t *testing.T) {
	peerVersion := "v1.4.0"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/peers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"self":"p1","peers":[
			{"id":"p2","addrs":[],"state":"alive","load":{},"last_seen":"2026-01-01T00:00:00Z","labels":[],"version":"v9.9.9"},
			{"id":"p1","addrs":[],"state":"alive","load":{},"last_seen":"2026-01-01T00:00:00Z","labels":[],"version":"` + peerVersion + `"}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := "client: " + buildinfo.Get().String() + "\n"

	runCLI(t, srv.URL, "", "version").check(t, 0, client+"peer:   v1.4.0 (p1, "+srv.URL+")\n", "")
	peerVersion = ""
	runCLI(t, srv.URL, "", "version").check(t, 0, "peer:   unknown", "")
	// Unreachable: the CLI's version all the same, then exit 1 naming the peer.
	runCLI(t, "http://127.0.0.1:1", "", "version").check(t, 1, client, "needle: version: peer http://127.0.0.1:1: ")
	runCLI(t, "http://127.0.0.1:1", "", "version", "--client").check(t, 0, client, "")
	runCLI(t, srv.URL, "", "version", "extra").check(t, 2, "", "version takes no arguments")
}

// A mistyped flag is answered with the flag it was probably meant to be.
func TestUnknownFlagSuggests(t *testing.T) {
	runCLI(t, "http://127.0.0.1:1", "", "submit", "--handlr", "x").check(t, 2, "", "(did you mean --handler?)")
	runCLI(t, "http://127.0.0.1:1", "", "--adr", "x", "peers").check(t, 2, "", "(did you mean --addr?)")
	runCLI(t, "http://127.0.0.1:1", "", "simulate", "--seeds", "1", "--peer", "3").check(t, 2, "", "(did you mean --peers?)")
}

// A peer that does not answer at all (nothing listens there, or no such
// host) is named with what to check; a peer that answers is not.
func TestUnreachablePeerSaysWhatToCheck(t *testing.T) {
	hint := "(no peer answers at http://127.0.0.1:1: start needled there, or point --addr or NEEDLE_ADDR at a running peer)"
	runCLI(t, "http://127.0.0.1:1", "", "peers").check(t, 1, "", "connect: connection refused "+hint)
	runCLI(t, "http://127.0.0.1:1", "", "get", "g1.0").check(t, 1, "", hint)
	runCLI(t, "http://no-such-host.invalid:7070", "", "stats").check(t, 1, "", "(no peer answers at http://no-such-host.invalid:7070:")
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	if r := runCLI(t, srv.URL, "", "get", "g1.0"); r.code != 1 || strings.Contains(r.stderr, "no peer answers") {
		t.Errorf("a peer that answers 404: exit %d, stderr %q; want 1 without the hint", r.code, r.stderr)
	}
}

// A value a flag cannot read says what the flag wants ("parse error" said
// nothing of it), in the command's flags and in the global ones.
func TestBadFlagValueSaysWhatItWants(t *testing.T) {
	runCLI(t, "http://127.0.0.1:1", "", "submit", "--handler", "x", "--timeout", "abc").
		check(t, 2, "", `invalid value "abc" for --timeout: want a duration such as "30s"`)
	runCLI(t, "http://127.0.0.1:1", "", "list", "--since", "yesterday").check(t, 2, "", `for --since: want a duration`)
	runCLI(t, "http://127.0.0.1:1", "", "submit", "--handler", "x", "--priority", "high").
		check(t, 2, "", `invalid value "high" for --priority: want an integer`)
}
