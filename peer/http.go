package peer

import (
	"maps"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/dash"
	"github.com/needle-mesh/needle/shard"
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
	lim.ValidPeer = p.validID     // a pin no member could have is refused
	lim.Forgotten = p.forgottenOf // and one to a peer forgotten for good
	mux := &routeMux{ServeMux: http.NewServeMux(), tokens: p.cfg.Tokens}
	mux.Handle("/", 0, api.NewHandler(backend{p}, api.HandlerOptions{
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
	mux.Handle("GET /{$}", api.ScopePublic, ui)
	mux.Handle("GET /dash/", api.ScopePublic, ui)
	// The peer's own API routes refuse an unknown query parameter as
	// api.NewHandler's do (400 naming it; ?foo=1 was ignored).
	mux.Handle("GET /v1/peers", api.ScopeRead, api.OnlyParams("GET /v1/peers", http.HandlerFunc(p.servePeers)))
	mux.Handle("GET /v1/audit", api.ScopeRead, api.OnlyParams("GET /v1/audit", http.HandlerFunc(p.serveAudit), "limit"))
	mux.Handle("POST /v1/drain", api.ScopeAdmin, api.OnlyParams("POST /v1/drain", api.NoBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.log.Warn("drain requested through the API", "by", api.By(r))
		audited := p.auditPeer(r.Context(), shard.EvPeerDrained, p.tr.ID(), api.By(r))
		p.RequestDrain()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"draining":true,"audited":` + strconv.FormatBool(audited) + `}`))
	}))))
	mux.Handle("POST /v1/peers/{id}/forget", api.ScopeAdmin, api.OnlyParams("POST /v1/peers/{id}/forget", api.NoBody(http.HandlerFunc(p.serveForget)), "force", "unsafe_recover"))
	debug := http.NewServeMux()
	debug.HandleFunc("/debug/pprof/", pprof.Index)
	debug.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	debug.HandleFunc("/debug/pprof/profile", pprof.Profile)
	debug.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	debug.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/", api.ScopeAdmin, debug)
	mux.refuseOtherMethods()
	return mux
}

// routeMux is an http.ServeMux that remembers the patterns it serves and
// the scope each needs, those of a handler with Patterns and Scopes (the
// api.Handler) included.
type routeMux struct {
	*http.ServeMux
	tokens   *api.Tokens // nil: an API without tokens
	patterns []string
	scopes   map[string]api.Scope // pattern -> the scope a token needs
	allow    map[string][]string  // path -> the methods of its own routes
}

// Handle registers h for pattern, as http.ServeMux does, behind the
// tokens for a route that needs scope (api.Guard). An api.Handler guards
// its routes itself (its scope is ignored), and brings its patterns and
// their scopes.
func (m *routeMux) Handle(pattern string, scope api.Scope, h http.Handler) {
	if m.scopes == nil {
		m.scopes = map[string]api.Scope{}
	}
	if ah, ok := h.(*api.Handler); ok {
		m.ServeMux.Handle(pattern, h)
		m.patterns = append(m.patterns, ah.Patterns()...)
		maps.Copy(m.scopes, ah.Scopes())
		return
	}
	m.ServeMux.Handle(pattern, api.Guard(m.tokens, scope, h))
	if method, path, ok := strings.Cut(pattern, " "); ok {
		if m.allow == nil {
			m.allow = map[string][]string{}
		}
		m.allow[path] = append(m.allow[path], method)
	}
	m.patterns = append(m.patterns, pattern)
	m.scopes[pattern] = scope
}

// refuseOtherMethods answers 405 with an Allow header, behind the tokens
// (any token: a 405 tells nothing), for a path of the mux's own routes
// asked with another method: without it the catch-all "/" (the API
// handler) would answer 404 no route. The API handler does the same for
// its routes.
func (m *routeMux) refuseOtherMethods() {
	for path, methods := range m.allow {
		m.ServeMux.Handle(path, api.Guard(m.tokens, api.ScopeRead|api.ScopeWorker|api.ScopeAdmin, api.MethodNotAllowed(methods)))
	}
}
