package peer

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestAPIDeadlines checks that a request body that stalls loses its
// connection, while a long poll (a GET held longer than the body timeout)
// is answered.
func TestAPIDeadlines(t *testing.T) {
	saved := apiBodyTimeout
	apiBodyTimeout = 100 * time.Millisecond
	t.Cleanup(func() { apiBodyTimeout = saved })
	bodyErr := make(chan error, 1)
	srv := httptest.NewServer(apiDeadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			_, err := io.ReadAll(r.Body)
			bodyErr <- err
			return
		}
		select { // a long poll, longer than the body timeout
		case <-time.After(3 * apiBodyTimeout):
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/tasks/x?wait=1s")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("long poll = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	select {
	case err := <-bodyErr:
		if err == nil {
			t.Fatal("a stalled body was read to the end")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled body holds its handler")
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("the connection of a stalled body stays open")
		}
	}
}
