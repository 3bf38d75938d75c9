package main

import (
	"net"
	"strings"
)

// withoutSelf drops the join addresses that name this peer, self being its
// own DNS name (--self-name): an address whose host is self or starts with
// self and a dot (needle-0.needle-peers.default.svc). Peers that share one
// join list, as the pods of a Kubernetes StatefulSet do, then found the
// mesh on the peer the list names and join it everywhere else. It returns
// the kept and the dropped addresses.
func withoutSelf(joins []string, self string) (kept, dropped []string) {
	self = strings.ToLower(strings.TrimSuffix(self, "."))
	for _, j := range joins {
		host := strings.ToLower(strings.TrimSuffix(joinHost(j), "."))
		if self != "" && (host == self || strings.HasPrefix(host, self+".")) {
			dropped = append(dropped, j)
		} else {
			kept = append(kept, j)
		}
	}
	return kept, dropped
}

// joinHost returns the DNS name or IP a join address dials: the value of a
// multiaddr's first component (/dns4/NAME/...), or the host of host:port.
func joinHost(j string) string {
	if strings.HasPrefix(j, "/") {
		parts := strings.SplitN(j, "/", 4)
		if len(parts) >= 3 {
			return parts[2]
		}
		return ""
	}
	host, _, err := net.SplitHostPort(j)
	if err != nil {
		return ""
	}
	return host
}
