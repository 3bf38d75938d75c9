package peer

import (
	"net/http"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// Per-request deadlines of the API. The server has no ReadTimeout or
// WriteTimeout, which would apply to every route and cut long polls.
// Variables only so that tests can shorten them.
var (
	// apiBodyTimeout bounds reading a request's body (a slow upload).
	apiBodyTimeout = time.Minute
	// apiWriteTimeout bounds a request's handling and answer, past the
	// longest long poll (?wait= is capped at api.DefaultMaxWait).
	apiWriteTimeout = api.DefaultMaxWait + time.Minute
	// apiIdleTimeout closes a keep-alive connection idle this long.
	apiIdleTimeout = 2 * time.Minute
)

// apiDeadlines sets the connection's read deadline for the request's body
// and its write deadline for the answer, so that a client that sends or
// reads slowly, or not at all, does not hold a connection forever.
func apiDeadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			_ = rc.SetReadDeadline(now.Add(apiBodyTimeout))
		}
		_ = rc.SetWriteDeadline(now.Add(apiWriteTimeout))
		h.ServeHTTP(w, r)
	})
}
