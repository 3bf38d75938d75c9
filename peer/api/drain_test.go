package api

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// recordingBody reports whether it was read to its end.
type recordingBody struct {
	io.Reader
	eof bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *recordingBody) Close() error { return nil }

// headerWatch records whether the body was read to its end when the
// answer began.
type headerWatch struct {
	*httptest.ResponseRecorder
	body     *recordingBody
	drainedB bool
}

func (h *headerWatch) WriteHeader(code int) {
	h.drainedB = h.body.eof
	h.ResponseRecorder.WriteHeader(code)
}

// A route that answers without reading its body (a cancel) has the body
// read before its answer's first byte, on every route but GET's.
func TestRoutesDrainTheBodyBeforeAnswering(t *testing.T) {
	h := NewHandler(&fakeBackend{}, HandlerOptions{})
	for _, path := range []string{"/v1/tasks/g1.0/cancel", "/v1/groups/g1/cancel", "/v1/tasks/bad/cancel"} {
		body := &recordingBody{Reader: strings.NewReader(`{"why": "` + strings.Repeat("x", 5000) + `"}`)}
		req := httptest.NewRequest("POST", path, nil)
		req.Body = body
		req.Header.Set("Content-Type", "application/json")
		w := &headerWatch{ResponseRecorder: httptest.NewRecorder(), body: body}
		h.ServeHTTP(w, req)
		if !w.drainedB {
			t.Errorf("POST %s answered %d before its body was read", path, w.Code)
		}
	}
}
