package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// maxAnswer bounds an answer the worker reads (a poll of 1,000 tasks with
// their payloads and inputs).
const maxAnswer = 256 << 20

// workerHTTP is a worker's HTTP client when its Client names none: the
// default transport keeps 2 idle connections per host, and a worker uses
// more at once (its poll, its report, heartbeats and logs of long tasks):
// the third would be closed after each request and dialed again.
var workerHTTP = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	return t
}()}

// answers holds the buffers answers are read into: a poll's answer runs
// to hundreds of KB, which a new buffer per request would grow to again.
// Decoding copies out what it keeps.
var answers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// errLeaseLost is returned for a report on a lease that is no longer
// current (409 lease_lost): the task is someone else's now.
var errLeaseLost = errors.New("client: lease lost")

// conn sends the worker protocol's requests to one peer.
type conn struct {
	base  string
	token string
	http  *http.Client
}

func newConn(c *api.Client) *conn {
	hc := c.HTTP
	if hc == nil {
		hc = workerHTTP
	}
	return &conn{base: strings.TrimRight(c.BaseURL, "/"), token: c.Token, http: hc}
}

// post sends one request and decodes a 2xx answer into out (nil: ignored).
// A non-2xx answer is an *api.Error; 409 lease_lost also wraps
// errLeaseLost.
func (c *conn) post(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("client: encode %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("client: POST %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := answers.Get().(*bytes.Buffer)
	defer answers.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return fmt.Errorf("client: POST %s: read answer: %w", path, err)
	}
	data = buf.Bytes()
	if resp.StatusCode/100 != 2 {
		return answerError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: POST %s: decode answer: %w", path, err)
	}
	return nil
}

// answerError is the error of a non-2xx answer. A peer's error body is
// kept whole, as api.Client keeps it (a 503's message names a partition's
// dead voters and the way out, past 200 bytes); only a body of no error
// (a proxy's page) is cut.
func answerError(status int, data []byte) error {
	var eb api.ErrorBody
	e := &api.Error{Status: status, Code: http.StatusText(status), Message: strings.TrimSpace(string(data))}
	if len(e.Message) > 200 {
		e.Message = e.Message[:200] + "..."
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		e = eb.Error
		e.Status = status
	}
	if status == http.StatusConflict && e.Code == api.CodeLeaseLost {
		return fmt.Errorf("%w: %w", errLeaseLost, e)
	}
	return e
}

// transient reports whether a failed request may succeed when sent again:
// the peer was unavailable (503, also 502 and 504 from a proxy), too busy
// (429), or did not answer (a connection error). Bad requests and lost
// leases are not.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var e *api.Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var ue *url.Error // the request was not answered
	return errors.As(err, &ue)
}

// backoff is a jittered exponential backoff.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

// wait waits for the next delay, in [d/2, d], or until ctx ends.
func (b *backoff) wait(ctx context.Context) error {
	if b.next < b.min {
		b.next = b.min
	}
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(b.next*2, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *backoff) reset() { b.next = 0 }

// retry sends a request until it succeeds, fails for good (not transient)
// or ctx ends.
func (c *conn) retry(ctx context.Context, bo backoff, path string, body, out any) error {
	for {
		err := c.post(ctx, path, body, out)
		if !transient(err) {
			return err
		}
		if werr := bo.wait(ctx); werr != nil {
			return fmt.Errorf("client: POST %s: gave up: %w (last error: %w)", path, werr, err)
		}
	}
}
