package api

import (
	"io"
	"net/http"
)

// maxDrain bounds what drainFirst reads of a body its route did not read.
const maxDrain = 1 << 20

// drainFirst reads the rest of a request's body (what its route did not
// read: a cancel's, or all of it when the route refused the request
// first) before the answer's first byte. A client that sends its body in
// a second write and asks to close the connection (Python's urllib)
// otherwise has the connection reset under it, the body still unread when
// the server closes it, and loses the answer.
func drainFirst(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h(&drainWriter{ResponseWriter: w, body: r.Body}, r)
	}
}

type drainWriter struct {
	http.ResponseWriter
	body    io.Reader
	drained bool
}

func (d *drainWriter) drain() {
	if !d.drained && d.body != nil {
		d.drained = true
		_, _ = io.CopyN(io.Discard, d.body, maxDrain)
	}
}

func (d *drainWriter) WriteHeader(code int) {
	d.drain()
	d.ResponseWriter.WriteHeader(code)
}

func (d *drainWriter) Write(b []byte) (int, error) {
	d.drain()
	return d.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (d *drainWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
