package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	// httpTimeout is the default client's whole-request timeout.
	httpTimeout = 30 * time.Second
	// httpMaxRedirects bounds the redirects the default client follows.
	httpMaxRedirects = 10
	// httpExcerpt bounds the response body quoted in an error, in bytes.
	httpExcerpt = 256
)

// errHTTPRefused marks a URL (or redirect) off the allow-list.
var errHTTPRefused = errors.New("http: refused")

// httpPayload is the http handler's payload.
type httpPayload struct {
	URL     string            `json:"url"`     // must be under a BuiltinConfig.HTTPAllow prefix
	Body    json.RawMessage   `json:"body"`    // sent as is; default null
	Headers map[string]string `json:"headers"` // optional; Content-Type is always application/json
	// WithInputs sends {"body": <body>, "inputs": {name: result}} instead
	// of the body alone, so the receiver gets the task's inputs. Default
	// false: the body is sent unchanged and the inputs are not sent.
	WithInputs bool `json:"with_inputs"`
}

// httpWithInputs is the request body of an http task with "with_inputs".
type httpWithInputs struct {
	Body   json.RawMessage            `json:"body"`
	Inputs map[string]json.RawMessage `json:"inputs"`
}

// allowedURL checks u against the allow-list and returns the URL to send
// (allowlist.List.Check).
func (b *builtins) allowedURL(u *url.URL) (*url.URL, error) {
	t, err := b.allow.Check(u)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errHTTPRefused, err)
	}
	return t, nil
}

// defaultClient is the client used when BuiltinConfig.HTTPClient is nil.
func (b *builtins) defaultClient() *http.Client {
	return &http.Client{
		Timeout: httpTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= httpMaxRedirects {
				return fmt.Errorf("%w: more than %d redirects", errHTTPRefused, httpMaxRedirects)
			}
			_, err := b.allowedURL(req.URL)
			return err
		},
	}
}

// validHeader reports whether k: v may be sent as a request header.
func validHeader(k, v string) bool {
	if k == "" || strings.ContainsAny(v, "\r\n\x00") {
		return false
	}
	for _, c := range []byte(k) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// httpHandler POSTs the payload's body to an allow-listed URL. With
// "with_inputs": true it POSTs {"body": <body>, "inputs": {...}} instead
// (inputs {} for a task without dependencies); without it the body is
// sent unchanged, as before inputs existed, and the inputs are not sent.
func (b *builtins) httpHandler(ctx context.Context, c Call) ([]byte, error) {
	var p httpPayload
	if err := decodePayload("http", c.Payload, &p); err != nil {
		return nil, err
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return nil, Permanent(fmt.Errorf("http: payload field \"url\": %w", err))
	}
	if u, err = b.allowedURL(u); err != nil {
		return nil, Permanent(err)
	}
	body := []byte(p.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	if p.WithInputs {
		inputs := c.Inputs
		if inputs == nil {
			inputs = map[string]json.RawMessage{} // always an object for the receiver
		}
		if body, err = json.Marshal(httpWithInputs{Body: body, Inputs: inputs}); err != nil {
			return nil, Permanent(fmt.Errorf("http: encoding inputs: %w", err))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, Permanent(fmt.Errorf("http: %w", err))
	}
	for k, v := range p.Headers {
		if !validHeader(k, v) {
			return nil, Permanent(fmt.Errorf("http: payload field \"headers\": invalid header %q", k))
		}
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, id := range callIdentity(c) {
		req.Header.Set(id.header, id.value) // after the payload's: a task cannot forge them
	}
	where := u.Scheme + "://" + u.Host + u.Path // no query: it may hold secrets
	resp, err := b.client.Do(req)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, fmt.Errorf("http: POST %s: %w", where, ctx.Err())
	case errors.Is(err, errHTTPRefused):
		return nil, Permanent(fmt.Errorf("http: POST %s: %w", where, err))
	default:
		return nil, fmt.Errorf("http: POST %s: %w", where, err)
	}
	defer resp.Body.Close()
	return b.httpOutcome(where, resp)
}

// httpOutcome maps a response to the handler's result or error: 2xx is a
// result, 5xx, 408 (request timeout) and 429 (too many requests) a
// retryable error, anything else a permanent one.
func (b *builtins) httpOutcome(where string, resp *http.Response) ([]byte, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, httpExcerpt))
		err := fmt.Errorf("http: POST %s: status %d: %q", where, resp.StatusCode,
			strings.ToValidUTF8(string(excerpt), "\uFFFD"))
		if resp.StatusCode >= 500 && resp.StatusCode <= 599 ||
			resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests {
			return nil, err
		}
		return nil, Permanent(err)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(b.maxOutput)+1))
	if err != nil {
		return nil, fmt.Errorf("http: POST %s: reading response: %w", where, err)
	}
	if len(data) > b.maxOutput {
		return nil, Permanent(fmt.Errorf("http: POST %s: response body exceeds %d bytes", where, b.maxOutput))
	}
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return []byte("null"), nil
	case json.Valid(data):
		return data, nil
	default:
		return json.Marshal(string(data))
	}
}
