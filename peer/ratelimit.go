package peer

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/needle-mesh/needle/peer/api"
)

// rateLimiter bounds the API requests of each client address (token bucket,
// golang.org/x/time/rate); beyond it a request gets 429. Buckets idle for a
// minute are dropped, so the table stays bounded by active clients.
type rateLimiter struct {
	rate    rate.Limit
	burst   int
	mu      sync.Mutex
	clients map[string]*client
	swept   time.Time
}

type client struct {
	lim  *rate.Limiter
	seen time.Time
}

func newRateLimiter(perSecond float64) *rateLimiter {
	return &rateLimiter{rate: rate.Limit(perSecond), burst: max(int(2*perSecond), 1), clients: map[string]*client{}}
}

func (rl *rateLimiter) allow(addr string, now time.Time) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if now.Sub(rl.swept) > time.Minute {
		for k, c := range rl.clients {
			if now.Sub(c.seen) > time.Minute {
				delete(rl.clients, k)
			}
		}
		rl.swept = now
	}
	c := rl.clients[host]
	if c == nil {
		c = &client{lim: rate.NewLimiter(rl.rate, rl.burst)}
		rl.clients[host] = c
	}
	c.seen = now
	return c.lim.AllowN(now, 1)
}

func (rl *rateLimiter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !rl.allow(r.RemoteAddr, time.Now()) {
			w.Header().Set("Retry-After", "1")
			writeError(w, api.CodeRateLimited, "too many requests from this client; slow down", "")
			return
		}
		h.ServeHTTP(w, r)
	})
}
