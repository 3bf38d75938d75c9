package peer

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/net/http2"
)

// closedByServer reports whether the server closes c: a read returns EOF
// (or a reset) before the deadline. An open keep-alive connection would
// time out instead.
func closedByServer(t *testing.T, c net.Conn, br *bufio.Reader) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// ask sends one HTTP/1.1 request on c and reads its answer.
func ask(t *testing.T, c net.Conn, br *bufio.Reader, req string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestRefusalClosesConnection: a 401 (the API handler's check and the
// peer's own routes'), a 403 (a cross-site write) and a 429 (--rate) say
// Connection: close, and the server closes the connection: a client
// refused kept it as an idle keep-alive connection, holding one of
// --max-conns slots for 2 minutes (audit finding 4). An answer served
// keeps it open.
func TestRefusalClosesConnection(t *testing.T) {
	// One request per 1,000 s: a client's second is a 429.
	p, _ := startPeerWith(t, Config{Token: "secret", RatePerClient: 0.001})
	for i, tt := range []struct {
		name, req string
		status    int
	}{
		{"no token, API route", "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 401},
		{"no token, peer route", "GET /v1/peers HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 401},
		{"cross-site write", "POST /v1/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nAuthorization: Bearer secret\r\n\r\n", 403},
		{"served", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 200},
		{"over --rate", "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n\r\n", 429},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Each case from its own loopback address: another client to --rate.
			from := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
			c, err := (&net.Dialer{LocalAddr: from}).Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			resp := ask(t, c, br, tt.req)
			if tt.status == 429 && resp.StatusCode != 429 { // the first of the client's requests
				resp = ask(t, c, br, tt.req)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d; want %d", resp.StatusCode, tt.status)
			}
			if tt.status == 200 {
				if resp.Close {
					t.Fatal("a served answer said Connection: close")
				}
				return
			}
			if !resp.Close {
				t.Errorf("%d without Connection: close (header %q)", tt.status, resp.Header.Get("Connection"))
			}
			if !closedByServer(t, c, br) {
				t.Errorf("the server kept the connection of a %d open", tt.status)
			}
		})
	}
}

// TestMaxConnsPerClient: with --max-conns 3 and --max-conns-per-client 2,
// a client holding 2 connections has its third closed at once (counted),
// and another client address is still served: the third does not take the
// last slot. Without the per-client bound one client held every slot.
func TestMaxConnsPerClient(t *testing.T) {
	p, _ := startPeerWith(t, Config{MaxConns: 3, MaxConnsPerClient: 2, capLoopback: true})
	dial := func(from string) (net.Conn, *bufio.Reader) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	const health = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	var held []net.Conn
	for range 2 {
		c, br := dial("127.0.0.1")
		ask(t, c, br, health) // served: it holds a slot
		held = append(held, c)
	}
	c, br := dial("127.0.0.1")
	if !closedByServer(t, c, br) {
		t.Fatal("a client's third connection was not closed past --max-conns-per-client 2")
	}
	if got := gather(t, p.metrics, "needle_http_connections_refused_total").GetMetric()[0].GetCounter().GetValue(); got != 1 {
		t.Errorf("needle_http_connections_refused_total = %v; want 1", got)
	}
	// 127.0.0.2 is another client on the same loopback interface.
	c, br = dial("127.0.0.2")
	if resp := ask(t, c, br, health); resp.StatusCode != 200 {
		t.Fatalf("another client got %d; want 200", resp.StatusCode)
	}
	c.Close()

	// A connection closed gives its client's count back.
	held[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, br := dial("127.0.0.1")
		if _, err := io.WriteString(c, health); err == nil {
			if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's connections were still refused after one of its two closed")
		}
		time.Sleep(10 * time.Millisecond) // polling: the server sees the close when its read ends
	}
}

// TestClientConnsCloseOnce: a connection closed twice (by the server and
// by the TLS layer) gives its client's count back once.
func TestClientConnsCloseOnce(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	ln := newClientConns(inner, 2, nil, refused)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial()
	dial()
	a, b := <-accepted, <-accepted
	defer b.Close()
	a.Close()
	a.Close()
	dial() // takes the slot a gave back
	defer (<-accepted).Close()
	c := dial()
	if !closedByServer(t, c, bufio.NewReader(c)) {
		t.Fatal("a third connection was served: a double Close gave two back")
	}
	var m dto.Metric
	if err := refused.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("refused = %v (%v); want 1", m.GetCounter().GetValue(), err)
	}
}

// TestMaxConnsPerClientFlag: 0 is the default; a negative value is an
// error naming the flag.
func TestMaxConnsPerClientFlag(t *testing.T) {
	c := Config{}
	if err := c.Validate(); err != nil || c.MaxConnsPerClient != DefaultMaxConnsPerClient {
		t.Fatalf("Validate() = %v, MaxConnsPerClient %d; want nil, %d", err, c.MaxConnsPerClient, DefaultMaxConnsPerClient)
	}
	c = Config{MaxConnsPerClient: -1}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--max-conns-per-client") {
		t.Fatalf("Validate() = %v; want an error naming --max-conns-per-client", err)
	}
}

// TestHTTP2Streams: over TLS the API speaks HTTP/2, and its SETTINGS let a
// connection carry at most apiMaxStreams (100) requests at once: with Go's
// default, 250, one connection held 250 long polls (audit finding 5).
func TestHTTP2Streams(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCert(t, cert, key, 1)
	p, _ := startPeerWith(t, Config{TLSCert: cert, TLSKey: key})
	conn, err := tls.Dial("tcp", p.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) // trusting none: the test reads SETTINGS only
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Fatalf("ALPN negotiated %q; want h2", got)
	}
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame() // a server's first frame is its SETTINGS
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v; want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != apiMaxStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (sent: %v); want %d", v, ok, apiMaxStreams)
	}
}

// Loopback clients are not bounded: a proxy on the host (a TLS
// terminator, a service mesh's sidecar) connects from there for every
// client it serves. Past the bound they are served, and their long polls
// too.
func TestLoopbackClientsUnbounded(t *testing.T) {
	p, _ := startPeerWith(t, Config{MaxConns: 8, MaxConnsPerClient: 2})
	const health = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	for i := range 4 {
		c, err := net.DialTimeout("tcp", p.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if resp := ask(t, c, bufio.NewReader(c), health); resp.StatusCode != 200 {
			t.Fatalf("loopback connection %d past --max-conns-per-client 2: %d; want 200", i+1, resp.StatusCode)
		}
	}
	if got := gather(t, p.metrics, "needle_http_connections_refused_total").GetMetric()[0].GetCounter().GetValue(); got != 0 {
		t.Errorf("needle_http_connections_refused_total = %v; want 0", got)
	}
	if !loopbackIP("127.0.0.2") || !loopbackIP("::1") || loopbackIP("10.0.0.1") || loopbackIP("") {
		t.Error("loopbackIP is wrong")
	}
}
