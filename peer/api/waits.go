package api

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// clientWaits counts the long polls each client address holds now, so
// that HandlerOptions.MaxWaitsPerClient bounds them: over HTTP/1 each
// holds a connection, and over HTTP/2 one connection carries many, so
// neither the connection bounds nor --rate (which counts requests, not
// how long they last) bound the waits of one client.
type clientWaits struct {
	max    int
	exempt func(ip string) bool // clients never bounded
	mu     sync.Mutex
	held   map[string]int // client IP -> long polls; no entry at 0
}

// holdWait counts r's long poll until release is called; over the
// client's bound it answers 429 rate_limited naming field (the parameter
// that asked to wait) and ok is false: the request did nothing.
func (s *server) holdWait(w http.ResponseWriter, r *http.Request, field string) (release func(), ok bool) {
	cw := s.waits
	if cw == nil {
		return func() {}, true
	}
	ip := r.RemoteAddr
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	if cw.exempt != nil && cw.exempt(ip) {
		return func() {}, true
	}
	cw.mu.Lock()
	over := cw.held[ip] >= cw.max
	if !over {
		cw.held[ip]++
	}
	cw.mu.Unlock()
	if over { // answered outside the lock: a slow client holds up no other
		w.Header().Set("Retry-After", "1")
		writeErr(w, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Field: field,
			Message: fmt.Sprintf("%s: this client address already holds %d long polls, the most it may at once; ask again when one ends, or without %s", field, cw.max, field)})
		return nil, false
	}
	return func() {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		if cw.held[ip]--; cw.held[ip] <= 0 {
			delete(cw.held, ip) // the table holds the clients waiting now
		}
	}, true
}
