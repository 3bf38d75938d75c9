package peer

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/dash"
)

func (p *Peer) httpHandler() http.Handler {
	mux := p.routes()
	h := browserGuard(p.metrics.user.instrument(mux, mux.patterns), p.cfg.Tokens != nil, p.cfg.HTTPAddr)
	if p.cfg.RatePerClient > 0 {
		h = newRateLimiter(p.cfg.RatePerClient).wrap(h)
	}
	return closeRefused(h)
}

// routes returns the mux of every HTTP route the peer serves. Each route
// served is documented in docs/openapi.yaml (TestOpenAPIRoutes).
func (p *Peer) routes() *routeMux {
	lim := p.cfg.Limits
	if p.cfg.StrictHandlers {
		lim.HasHandler = p.handlers.Has
	}
	lim.Notify = p.notifier.check
	mux := &routeMux{ServeMux: http.NewServeMux()}
	mux.Handle("/", api.NewHandler(backend{p}, api.HandlerOptions{
		Limits: lim,
		// Half a client's connections: over HTTP/1 its waits leave it
		// connections for its other requests.
		MaxWaitsPerClient: max(p.cfg.MaxConnsPerClient/2, 1),
		WaitsExempt:       p.exemptClient(),
		Tokens:            p.cfg.Tokens,
		Metrics:           promhttp.HandlerFor(p.metrics.reg, promhttp.HandlerOpts{}),
		Logger:            p.log,
		Ready:             p.readiness,
		InPeers:           p.handlers.Has,
	}))
	ui := dash.Handler()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /dash/", ui)
	// The peer's own API routes refuse an unknown query parameter as
	// api.NewHandler's do (400 naming it; ?foo=1 was ignored).
	mux.Handle("GET /v1/peers", p.requireToken(api.OnlyParams("GET /v1/peers", http.HandlerFunc(p.servePeers))))
	mux.Handle("GET /v1/audit", p.requireToken(api.OnlyParams("GET /v1/audit", http.HandlerFunc(p.serveAudit), "limit")))
	mux.Handle("POST /v1/drain", p.requireToken(api.OnlyParams("POST /v1/drain", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.log.Warn("drain requested through the API", "by", r.RemoteAddr)
		p.RequestDrain()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"draining":true}`))
	}))))
	mux.Handle("POST /v1/peers/{id}/forget", p.requireToken(api.OnlyParams("POST /v1/peers/{id}/forget", http.HandlerFunc(p.serveForget), "force")))
	debug := http.NewServeMux()
	debug.HandleFunc("/debug/pprof/", pprof.Index)
	debug.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	debug.HandleFunc("/debug/pprof/profile", pprof.Profile)
	debug.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	debug.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/", p.requireToken(debug))
	mux.refuseOtherMethods(p.requireToken)
	return mux
}

// routeMux is an http.ServeMux that remembers the patterns it serves,
// those of a handler with Patterns (the api.Handler) included.
type routeMux struct {
	*http.ServeMux
	patterns []string
	allow    map[string][]string // path -> the methods of its own routes
}

// Handle registers h for pattern, as http.ServeMux does.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	if method, path, ok := strings.Cut(pattern, " "); ok {
		if m.allow == nil {
			m.allow = map[string][]string{}
		}
		m.allow[path] = append(m.allow[path], method)
	}
	if ph, ok := h.(interface{ Patterns() []string }); ok {
		m.patterns = append(m.patterns, ph.Patterns()...)
		return
	}
	m.patterns = append(m.patterns, pattern)
}

// refuseOtherMethods answers 405 with an Allow header, behind guard, for
// a path of the mux's own routes asked with another method: without it the
// catch-all "/" (the API handler) would answer 404 no route. The API
// handler does the same for its routes.
func (m *routeMux) refuseOtherMethods(guard func(http.Handler) http.Handler) {
	for path, methods := range m.allow {
		m.ServeMux.Handle(path, guard(api.MethodNotAllowed(methods)))
	}
}

// HandleFunc registers f for pattern, as http.ServeMux does.
func (m *routeMux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// requireToken guards h with the API token when one is set.
func (p *Peer) requireToken(h http.Handler) http.Handler {
	if p.cfg.Tokens == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.cfg.Tokens.BearerOK(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="needle"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing or wrong bearer token"}}`))
			return
		}
		h.ServeHTTP(w, r)
	})
}
