package peer

import (
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// clientConns is the API's listener under the --max-conns bound
// (netutil.LimitListener wraps it): a connection from a client address
// that already holds max open connections is closed as soon as it is
// accepted, and so never takes a --max-conns slot. Without it one client
// could hold every slot: 1,024 idle keep-alive connections, one 401 each,
// blocked the whole API, /healthz included, for 2 minutes.
type clientConns struct {
	net.Listener
	max     int
	exempt  func(ip string) bool // clients never bounded (loopback: a proxy on the host)
	refused prometheus.Counter   // nil: not counted
	mu      sync.Mutex
	open    map[string]int // client IP -> connections open; no entry at 0
}

func newClientConns(ln net.Listener, max int, exempt func(string) bool, refused prometheus.Counter) *clientConns {
	return &clientConns{Listener: ln, max: max, exempt: exempt, refused: refused, open: map[string]int{}}
}

// Accept returns the next connection whose client is under its bound.
func (l *clientConns) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr().String())
		if l.exempt != nil && l.exempt(ip) {
			return c, nil
		}
		if l.take(ip) {
			return &clientConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		if l.refused != nil {
			l.refused.Inc()
		}
		_ = c.Close()
	}
}

func (l *clientConns) take(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] >= l.max {
		return false
	}
	l.open[ip]++
	return true
}

func (l *clientConns) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip) // the table holds the clients connected now
	}
}

// clientConn gives its client's count back at its first Close: the
// server and the TLS layer may each close it.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// apiMaxStreams bounds the requests one HTTP/2 connection (the API over
// TLS) carries at once: with Go's default, 250, one connection, counted
// once by --max-conns and --max-conns-per-client, held 250 long polls.
const apiMaxStreams = 100

// loopbackIP reports whether ip is a loopback address (127.0.0.0/8, ::1).
func loopbackIP(ip string) bool {
	a := net.ParseIP(ip)
	return a != nil && a.IsLoopback()
}

// clientIP is the host of a remote address ("10.0.0.1:5555" -> "10.0.0.1"),
// or the address itself when it has no port.
func clientIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// closeRefused answers 401, 403 and 429 with Connection: close, so the
// server closes the connection once the answer is sent: a client refused
// keeps no idle keep-alive connection, which held a --max-conns slot for 2
// minutes. Over HTTP/2 the server shuts the connection down gracefully
// (GOAWAY): the requests it carries end first.
func closeRefused(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&refusalWriter{ResponseWriter: w}, r)
	})
}

// refusalWriter adds Connection: close to a 401, 403 or 429.
type refusalWriter struct {
	http.ResponseWriter
}

func (w *refusalWriter) WriteHeader(code int) {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on (long polls, streaming answers).
func (w *refusalWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
