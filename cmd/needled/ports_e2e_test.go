package main

import (
	"net"
	"strings"
	"testing"
)

// startRetrying starts the daemons again on new ports when one exits
// because an address it was to listen on was taken (here, held by the
// test in the first two attempts: the mesh port, then the API's), and
// the serving daemons it returns answer at the addresses it names.
func TestStartRetryingAfterAddrInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	bin := buildNeedled(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	tries := 0
	ds, addrs := startRetrying(t, func() []*daemon {
		tries++
		listen, http := "/ip4/127.0.0.1/tcp/0", anyPort
		switch tries {
		case 1:
			listen = "/ip4/127.0.0.1/tcp/" + busyPort
		case 2:
			http = busy.Addr().String()
		}
		return []*daemon{
			spawnDaemon(t, bin, nil, "--data", t.TempDir(), "--http", anyPort, "--listen", "/ip4/127.0.0.1/tcp/0"),
			spawnDaemon(t, bin, nil, "--data", t.TempDir(), "--http", http, "--listen", listen),
		}
	})
	if tries != 3 || len(ds) != 2 {
		t.Fatalf("started %d daemons in %d tries; want 2 in 3", len(ds), tries)
	}
	for _, a := range addrs {
		if a == busy.Addr().String() || !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("a daemon serves at %q; want a loopback address of its own", a)
		}
		var ps struct{ Self string }
		if err := getJSON(a, "/v1/peers", &ps); err != nil || ps.Self == "" {
			t.Errorf("GET /v1/peers at %s: %+v, %v", a, ps, err)
		}
	}
}
