package peer

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/needle-mesh/needle/peer/api"
)

// healthMaxConns bounds the health listener's open connections: a probe
// or a scraper opens one at a time, and a flood of others cannot take
// the API's (nor the API's flood these).
const healthMaxConns = 32

// healthMaxConnsPerClient bounds one client address's open connections
// on the health listener, loopback included: without it one client
// holding 32 keep-alive connections left a probe waiting for ever
// (audit s75, F4).
const healthMaxConnsPerClient = 4

// healthIdleTimeout closes an idle keep-alive connection of the health
// listener: a probe needs none, and a scraper reconnects.
const healthIdleTimeout = 2 * time.Second

// listenHealth opens the health listener (Config.HealthAddr, or the
// Runtime's), nil when there is none.
func (p *Peer) listenHealth() (net.Listener, error) {
	ln := p.cfg.Runtime.HealthListener
	if ln == nil && p.cfg.HealthAddr == "" {
		return nil, nil
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", p.cfg.HealthAddr); err != nil {
			return nil, fmt.Errorf("peer: health listener (--health-listen) on %s: %w", p.cfg.HealthAddr, err)
		}
	}
	// A connection of a client over its own bound is closed without
	// taking one of the 32.
	return netutil.LimitListener(newClientConns(ln, healthMaxConnsPerClient, nil, nil), healthMaxConns), nil
}

// healthServer serves the health listener: GET /healthz as the API
// answers it and GET /metrics, without the API token, each connection
// bounded in time (no long poll runs here); any other request is a 404.
func (p *Peer) healthServer() *http.Server {
	h := api.NewHandler(backend{p}, api.HandlerOptions{
		Metrics: promhttp.HandlerFor(p.metrics.reg, promhttp.HandlerOpts{}),
		Ready:   p.readiness,
		Logger:  p.log,
	})
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", h)
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, api.CodeNotFound, "no route "+r.Method+" "+r.URL.Path+
			" on the health listener: it serves GET /healthz and GET /metrics only (the API is on --http)", "")
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: healthIdleTimeout}
}

// HealthAddr returns the health listener's address once Run has started
// listening; "" without one (Config.HealthAddr).
func (p *Peer) HealthAddr() string {
	<-p.ready
	if p.healthLn == nil {
		return ""
	}
	return p.healthLn.Addr().String()
}
