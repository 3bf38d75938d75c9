// Package loopport finds TCP ports free on 127.0.0.1 for tests whose
// listeners' addresses must be known before they start (the mesh ports of
// --initial-peers, a seed's port named in every --join). A port found
// free and released can still be taken by another process before its
// listener binds it: such tests start again on new ports when a listen
// fails with "address already in use". Listeners whose address can be
// learned after they bind should bind port 0 instead.
package loopport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// The range Free draws from: below the kernel's ephemeral range
// (32768-60999 on Linux). A port from net.Listen(":0") is an ephemeral
// one, and the connections and port-0 listeners of this process and of
// others (libp2p hosts, HTTP servers) draw from that range too: one of
// them took such a port before its listener bound it.
const (
	First = 20000
	Last  = 31999
)

// ErrNone is returned when no port of the range was free.
var ErrNone = errors.New("loopport: no free loopback port in 20000-31999")

var (
	mu   sync.Mutex
	used = map[int]bool{}
)

// Free returns a port of First-Last free on 127.0.0.1 a moment ago, never
// the same twice in a process.
func Free() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		port := First + rand.IntN(Last-First+1)
		if used[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		used[port] = true
		return port, nil
	}
	return 0, ErrNone
}
