package peer

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/needle-mesh/needle/peer/api"
)

func (p *Peer) httpHandler() http.Handler {
	lim := p.cfg.Limits
	lim.HasHandler = p.handlers.Has
	return api.NewHandler(backend{p}, api.HandlerOptions{
		Limits:  lim,
		Token:   p.cfg.Token,
		Metrics: promhttp.HandlerFor(p.metrics.reg, promhttp.HandlerOpts{}),
		Logger:  p.log,
	})
}
