package peer

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/needle-mesh/needle/shard"
)

// handlerResults are the values of needle_handler_outcomes_total's result
// label, each present from the start for every registered handler.
var handlerResults = []string{"succeeded", "failed", "timed_out", "aborted"}

// userMetrics are the metrics users alert on: what each handler's attempts
// ended with, the tasks submitted through this peer, and the HTTP API's
// requests by route, status and duration.
type userMetrics struct {
	handlerOutcomes *prometheus.CounterVec
	submitted       prometheus.Counter
	httpRequests    *prometheus.CounterVec
	httpSeconds     *prometheus.HistogramVec
	oldestReady     *prometheus.GaugeVec
	workerDeaths    *prometheus.CounterVec
	crashLimit      prometheus.Counter
	// handlers are the handler label values of every metric labelled by
	// handler: oldestReady, handlerOutcomes and needle_task_run_seconds.
	// A handler's oldestReady series stays, at 0, once its queue is empty.
	handlers *handlerLabels
}

// maxHandlerSeries bounds the handler label values of a metric (the
// registered handlers, then the first others seen; the rest are
// "other"): the handler of a task is whatever its submitter wrote, and a
// series per name would let a submitter grow /metrics without end.
const maxHandlerSeries = 256

// otherHandler is the handler label of the handlers past maxHandlerSeries.
const otherHandler = "other"

// handlerLabels maps handler names to the values of a handler label,
// shared by the metrics labelled by handler, so that a handler is its own
// series in all of them or "other" in all: the registered handlers, then
// the first handlers seen, up to max values, then "other" (max+1 values
// at most). It is safe for concurrent use (the loop, the workers and the
// API's handlers count through it).
type handlerLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// newHandlerLabels returns the labels of the registered handlers, each
// its own value whatever max, then room for others up to max.
func newHandlerLabels(registered []string, max int) *handlerLabels {
	l := &handlerLabels{max: max, seen: make(map[string]bool, len(registered))}
	for _, h := range registered {
		l.seen[h] = true
	}
	return l
}

// label returns handler's label value: handler once it has one, or while
// fewer than max handlers do; else "other".
func (l *handlerLabels) label(handler string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.seen[handler] {
		if len(l.seen) >= l.max {
			handler = otherHandler
		}
		l.seen[handler] = true
	}
	return handler
}

// values returns the label values given so far.
func (l *handlerLabels) values() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Keys(l.seen))
}

// workerHeld are the values of needle_worker_deaths_total's held label.
var workerHeld = []string{"none", "one", "several"}

// workerDied counts a dead external worker that held held leases.
func (u *userMetrics) workerDied(held int) {
	u.workerDeaths.WithLabelValues(workerHeld[min(held, 2)]).Inc()
}

func newUserMetrics(reg *prometheus.Registry, handlers []string) *userMetrics {
	u := &userMetrics{
		handlerOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_handler_outcomes_total",
			Help: "Attempts run by this peer's workers, by handler (at most 256 handlers, then other) and result (succeeded, failed, timed_out, aborted: canceled or lease lost)."},
			[]string{"handler", "result"}),
		submitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_tasks_submitted_total",
			Help: "Tasks created by submissions received on this peer (an idempotent repeat creates none)."}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_http_requests_total",
			Help: "HTTP API requests by route (the served pattern) and status code."}, []string{"route", "code"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "needle_http_request_seconds",
			Help: "HTTP API request duration by route (long polls included).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)},
			[]string{"route"}),
		oldestReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "needle_ready_oldest_seconds",
			Help: "Age of the oldest READY task per handler (at most 256 handlers, then other; since it became READY), in the partitions this peer owns; 0 when none waits. The mesh's is the max over its peers."},
			[]string{"handler"}),
		workerDeaths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_worker_deaths_total",
			Help: "External workers this peer found dead (no poll or heartbeat for --worker-ttl), by the tasks they held: none, one (a strike against it), several."},
			[]string{"held"}),
		crashLimit: prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_worker_crash_limit_total",
			Help: "Tasks this peer failed for good because --worker-crash-limit workers in a row died running them alone."}),
		handlers: newHandlerLabels(handlers, maxHandlerSeries),
	}
	reg.MustRegister(u.handlerOutcomes, u.submitted, u.httpRequests, u.httpSeconds, u.oldestReady, u.workerDeaths, u.crashLimit)
	for _, h := range workerHeld {
		u.workerDeaths.WithLabelValues(h)
	}
	for _, h := range handlers {
		for _, r := range handlerResults {
			u.handlerOutcomes.WithLabelValues(h, r)
		}
		u.oldestReady.WithLabelValues(h)
	}
	return u
}

// readyAges sets needle_ready_oldest_seconds at now from the times each
// handler's oldest READY task became READY (Node.OldestReady).
func (u *userMetrics) readyAges(oldest map[string]time.Time, now time.Time) {
	ages := make(map[string]float64, len(oldest))
	for h, since := range oldest {
		h = u.handlers.label(h)
		ages[h] = max(ages[h], now.Sub(since).Seconds())
	}
	for _, h := range u.handlers.values() {
		u.oldestReady.WithLabelValues(h).Set(ages[h])
	}
}

// outcome counts one attempt of handler.
func (u *userMetrics) outcome(handler string, o shard.Outcome, aborted bool) {
	r := "failed"
	switch {
	case aborted:
		r = "aborted"
	case o.OK:
		r = "succeeded"
	case o.TimedOut:
		r = "timed_out"
	}
	u.handlerOutcomes.WithLabelValues(u.handlers.label(handler), r).Inc()
}

// instrument counts h's requests by the pattern that served them; routes
// (every pattern served) have their duration series from the start.
func (u *userMetrics) instrument(h http.Handler, routes []string) http.Handler {
	for _, r := range routes {
		u.httpSeconds.WithLabelValues(r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		route := r.Pattern // set by the innermost ServeMux that matched
		if route == "" {
			route = "other"
		}
		u.httpRequests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		u.httpSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes a flush on (long polls, streaming answers).
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
