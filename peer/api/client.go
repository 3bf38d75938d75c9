package api

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

// maxResponse bounds a response body the client reads (a group of 100,000
// tasks is a few tens of MB).
const maxResponse = 256 << 20

// Client calls the v1 API of a peer. The zero HTTP uses
// http.DefaultClient; long polls are bounded by ctx and the server's cap.
type Client struct {
	BaseURL string       // e.g. "http://127.0.0.1:7070"
	Token   string       // bearer token; "" sends none
	HTTP    *http.Client // nil = http.DefaultClient
}

// traceparentKey keys the traceparent a context's submissions carry.
type traceparentKey struct{}

// WithTraceparent returns ctx whose requests carry traceparent, a W3C
// traceparent, as their traceparent header: a submission made with it
// joins that trace (docs/api.md, Tracing). "" sends none.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, traceparent)
}

// SubmitTask submits one task. The response's Created is false for an
// idempotent repeat.
func (c *Client) SubmitTask(ctx context.Context, req *SubmitTaskRequest) (*SubmitTaskResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("api: encode task: %w", err)
	}
	var out SubmitTaskResponse
	status, err := c.do(ctx, http.MethodPost, "/v1/tasks", body, &out)
	out.Created = status == http.StatusCreated
	return &out, err
}

// SubmitGroup submits a group.
func (c *Client) SubmitGroup(ctx context.Context, req *SubmitGroupRequest) (*SubmitGroupResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("api: encode group: %w", err)
	}
	return c.SubmitGroupJSON(ctx, body)
}

// SubmitGroupJSON submits a group given as its raw JSON body.
func (c *Client) SubmitGroupJSON(ctx context.Context, body []byte) (*SubmitGroupResponse, error) {
	var out SubmitGroupResponse
	status, err := c.do(ctx, http.MethodPost, "/v1/groups", body, &out)
	out.Created = status == http.StatusCreated
	return &out, err
}

// GetTask returns a task; wait > 0 long-polls until it is terminal or the
// wait (capped by the server) ends.
func (c *Client) GetTask(ctx context.Context, id string, wait time.Duration) (*Task, error) {
	var out Task
	_, err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+waitQuery(wait, nil), nil, &out)
	return &out, err
}

// GetGroup returns a group with all its tasks; wait as in GetTask.
func (c *Client) GetGroup(ctx context.Context, id string, wait time.Duration) (*Group, error) {
	var out Group
	_, err := c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(id)+waitQuery(wait, nil), nil, &out)
	return &out, err
}

// GroupSummary returns a group without its task list (state, counts and
// total only): cheap enough to poll for progress.
func (c *Client) GroupSummary(ctx context.Context, id string, wait time.Duration) (*Group, error) {
	var out Group
	q := waitQuery(wait, url.Values{"tasks": {"false"}})
	_, err := c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(id)+q, nil, &out)
	return &out, err
}

// Events returns a task's history, oldest first.
func (c *Client) Events(ctx context.Context, id string) ([]Event, error) {
	var out Events
	_, err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/events", nil, &out)
	return out.Events, err
}

// CancelTask cancels a task and returns it.
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	var out Task
	_, err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/cancel", nil, &out)
	return &out, err
}

// CancelGroup cancels every non-terminal task of a group and returns it.
func (c *Client) CancelGroup(ctx context.Context, id string) (*Group, error) {
	var out Group
	_, err := c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(id)+"/cancel", nil, &out)
	return &out, err
}

// Health returns nil when the peer serves.
func (c *Client) Health(ctx context.Context) error {
	var out Health
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, &out)
	return err
}

func waitQuery(wait time.Duration, q url.Values) string {
	if wait > 0 {
		if q == nil {
			q = url.Values{}
		}
		q.Set("wait", wait.String())
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// do sends one request and decodes a 2xx body into out; any other status
// is an *Error. It returns the status code.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	return c.doHeader(ctx, method, path, body, out, "", "")
}

// doHeader is do with one more request header (none when value is "").
func (c *Client) doHeader(ctx context.Context, method, path string, body []byte, out any, header, value string) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return 0, fmt.Errorf("api: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if value != "" {
		req.Header.Set(header, value)
	}
	if tp, _ := ctx.Value(traceparentKey{}).(string); tp != "" {
		req.Header.Set("traceparent", tp)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("api: %s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		if resp.StatusCode == http.StatusBadRequest && strings.TrimSpace(string(data)) == plainToTLS {
			return resp.StatusCode, fmt.Errorf("%w (%s)", ErrServesHTTPS, c.BaseURL)
		}
		return resp.StatusCode, responseError(resp.StatusCode, data)
	}
	if out == nil {
		return resp.StatusCode, nil // the caller wants no body (drain, forget)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("api: %s %s: decode response: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

// plainToTLS is what Go's HTTPS server answers a request in plain HTTP.
const plainToTLS = "Client sent an HTTP request to an HTTPS server."

// ErrServesHTTPS is the error of a request sent in plain HTTP to a peer
// that serves HTTPS (--tls-cert): its BaseURL must be https://.
var ErrServesHTTPS = errors.New("api: the peer serves HTTPS (--tls-cert): use an https:// address")

// responseError decodes an error body; a body that is not one still gives
// an *Error with the status and a code derived from it.
func responseError(status int, data []byte) *Error {
	var eb ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		eb.Error.Status = status
		return eb.Error
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Code: codeOf(status), Message: msg}
}
