package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Task is a task as GET /v1/tasks/{id} returns it (the fields bench reads).
type Task struct {
	ID         string          `json:"id"`
	Group      string          `json:"group"`
	Handler    string          `json:"handler"`
	State      string          `json:"state"`
	Attempt    int             `json:"attempt"`
	Round      int             `json:"round"`
	Peer       string          `json:"peer"`
	Result     json.RawMessage `json:"result"`
	Error      any             `json:"error"`
	StartedAt  Time            `json:"started_at"`
	FinishedAt Time            `json:"finished_at"`
}

// Time is an API timestamp (RFC 3339); null, absent or "" is the zero time.
type Time struct{ time.Time }

// UnmarshalJSON accepts an RFC 3339 string, "" or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if s := string(b); s == "null" || s == `""` {
		t.Time = time.Time{}
		return nil
	}
	return t.Time.UnmarshalJSON(b)
}

// Group is a group as GET /v1/groups/{id} returns it.
type Group struct {
	ID     string         `json:"id"`
	Mode   string         `json:"mode"`
	State  string         `json:"state"`
	Counts map[string]int `json:"counts"`
	Tasks  []Task         `json:"tasks"`
}

// TaskSpec is one task of a submission.
type TaskSpec struct {
	Name    string          `json:"name,omitempty"`
	Handler string          `json:"handler"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// GroupSpec is the body of POST /v1/groups.
type GroupSpec struct {
	Mode  string     `json:"mode"`
	Tasks []TaskSpec `json:"tasks"`
}

// Submitted is the answer to POST /v1/groups: task ids by name.
type Submitted struct {
	Group string            `json:"group"`
	Tasks map[string]string `json:"tasks"`
}

// PeerInfo is one entry of GET /v1/peers.
type PeerInfo struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
	State string   `json:"state"`
}

// Peers is the answer to GET /v1/peers.
type Peers struct {
	Self  string     `json:"self"`
	Peers []PeerInfo `json:"peers"`
	Node  *NodeStats `json:"node"`
}

// NodeStats is the partition part of the "node" object of GET /v1/peers.
type NodeStats struct {
	Leading     int `json:"Leading"`
	Held        int `json:"Held"`
	Voter       int `json:"Voter"`
	LeaderKnown int `json:"LeaderKnown"`
	// Counts are the tasks of the partitions the peer leads, by state
	// (UNKNOWN, PENDING, READY, RUNNING, WAITING, SUCCEEDED, FAILED, CANCELED).
	Counts [8]int `json:"Counts"`
}

// APIError is an error answer of the API.
type APIError struct {
	Status  int    // HTTP status
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// terminal reports whether a task or group state never changes again.
func terminal(state string) bool {
	switch state {
	case "SUCCEEDED", "FAILED", "CANCELED":
		return true
	}
	return false
}

// Client talks to one peer's HTTP API.
type Client struct {
	base string // "http://127.0.0.1:port"
	hc   *http.Client
}

// NewClient returns a client of the peer serving addr (host:port).
func NewClient(addr string, hc *http.Client) *Client {
	return &Client{base: "http://" + addr, hc: hc}
}

// newHTTPClient returns a client that keeps enough idle connections for
// the concurrent submitters and waiters.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}
}

// requestTimeout bounds one API request (beyond its long-poll wait).
const requestTimeout = 30 * time.Second

// do sends a JSON request and decodes a 2xx answer into out.
// The request is bounded by requestTimeout plus wait, the long-poll time.
func (c *Client) do(ctx context.Context, method, path string, wait time.Duration, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout+wait)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := encodeBody(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, release, err := readBody(resp)
	defer release()
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %w", method, path, decodeError(resp.StatusCode, b))
	}
	if out == nil {
		return nil
	}
	switch o := out.(type) {
	case *Group:
		var fast Group
		if decodeGroup(b, &fast) {
			*o = fast
			return nil
		}
	case *Submitted:
		var fast Submitted
		if decodeSubmitted(b, &fast) {
			*o = fast
			return nil
		}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return nil
}

// readBody reads an answer's body into a buffer of the length it
// announced, from bodies, or as io.ReadAll does when it announced none.
// Nothing decoded from it may keep pointing into it after release:
// encoding/json copies what it keeps, and so does decodeGroup.
//
// A W1 group's answer is 410 KB: io.ReadAll reached it by doubling, and
// a new buffer of that size each time was cleared, and faulted in, at a
// cost near the decoding's.
func readBody(resp *http.Response) (b []byte, release func(), err error) {
	n := resp.ContentLength
	if n <= 0 || n > maxPooledBody {
		b, err = io.ReadAll(resp.Body)
		return b, func() {}, err
	}
	p, _ := bodies.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	if int64(cap(*p)) < n {
		*p = make([]byte, n)
	}
	b = (*p)[:n]
	_, err = io.ReadFull(resp.Body, b)
	return b, func() { bodies.Put(p) }, err
}

// bodies keeps answers' buffers for the next answers; maxPooledBody
// bounds what it keeps.
var bodies sync.Pool

const maxPooledBody = 4 << 20

// decodeError turns an error body into an *APIError.
func decodeError(status int, body []byte) *APIError {
	var eb struct {
		Error APIError `json:"error"`
	}
	e := &eb.Error
	if json.Unmarshal(body, &eb) != nil || e.Code == "" {
		e.Message = string(bytes.TrimSpace(body))
	}
	e.Status = status
	return e
}

// Healthy reports whether GET /healthz answers 200.
func (c *Client) Healthy(ctx context.Context) bool {
	return c.do(ctx, http.MethodGet, "/healthz", 0, nil, nil) == nil
}

// Peers returns GET /v1/peers.
func (c *Client) Peers(ctx context.Context) (Peers, error) {
	var p Peers
	err := c.do(ctx, http.MethodGet, "/v1/peers", 0, nil, &p)
	return p, err
}

// SubmitGroup posts a group.
func (c *Client) SubmitGroup(ctx context.Context, g GroupSpec) (Submitted, error) {
	var s Submitted
	err := c.do(ctx, http.MethodPost, "/v1/groups", 0, g, &s)
	return s, err
}

// SubmitTask posts a single task and returns its id.
func (c *Client) SubmitTask(ctx context.Context, t TaskSpec) (string, error) {
	var s struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/tasks", 0, t, &s)
	return s.ID, err
}

// SubmitTaskWait submits t and waits up to wait for it to end, in one
// call (POST /v1/tasks?wait=): the task as it stood when the peer answered.
func (c *Client) SubmitTaskWait(ctx context.Context, t TaskSpec, wait time.Duration) (Task, error) {
	var s struct {
		ID   string `json:"id"`
		Task *Task  `json:"task"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/tasks"+waitQuery(wait), wait, t, &s); err != nil {
		return Task{}, err
	}
	if s.Task == nil {
		return Task{ID: s.ID}, nil
	}
	return *s.Task, nil
}

// Task returns a task, long-polling up to wait (0: no wait).
func (c *Client) Task(ctx context.Context, id string, wait time.Duration) (Task, error) {
	var t Task
	err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+waitQuery(wait), wait, nil, &t)
	return t, err
}

// Group returns a group, long-polling up to wait (0: no wait).
func (c *Client) Group(ctx context.Context, id string, wait time.Duration) (Group, error) {
	var g Group
	err := c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(id)+waitQuery(wait), wait, nil, &g)
	return g, err
}

func waitQuery(wait time.Duration) string {
	if wait <= 0 {
		return ""
	}
	return "?wait=" + wait.String()
}

// Forget asks the peer to forget the member id (POST /v1/peers/{id}/forget),
// even if that peer still hears from it: bench forgets the peers it
// killed, which some peers may not hold dead yet.
func (c *Client) Forget(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/peers/"+url.PathEscape(id)+"/forget?force=true", 0, nil, nil)
}

// isStatus reports whether err is an API error with the HTTP status.
func isStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// peerState returns the state ps gives the member id, or "".
func peerState(ps Peers, id string) string {
	for _, p := range ps.Peers {
		if p.ID == id {
			return p.State
		}
	}
	return ""
}
