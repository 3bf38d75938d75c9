package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ListTasks lists tasks across the mesh (GET /v1/tasks) with the filters
// in q (state, handler, since..., limit, cursor).
func (c *Client) ListTasks(ctx context.Context, q url.Values) (*TaskList, error) {
	var out TaskList
	_, err := c.do(ctx, http.MethodGet, "/v1/tasks"+query(q), nil, &out)
	return &out, err
}

// ListGroups lists groups across the mesh (GET /v1/groups).
func (c *Client) ListGroups(ctx context.Context, q url.Values) (*GroupList, error) {
	var out GroupList
	_, err := c.do(ctx, http.MethodGet, "/v1/groups"+query(q), nil, &out)
	return &out, err
}

// Stats returns the mesh's task counts per handler (GET /v1/stats).
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var out Stats
	_, err := c.do(ctx, http.MethodGet, "/v1/stats", nil, &out)
	return &out, err
}

func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// RetryTask runs a FAILED or CANCELED task again; key ("" = none) makes
// the request idempotent (Repeat: the key was used before, nothing ran).
func (c *Client) RetryTask(ctx context.Context, id, key string) (*RetriedTask, error) {
	var out RetriedTask
	_, err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/retry", retryBody(key), &out)
	return &out, err
}

// RetryGroup runs every FAILED and CANCELED task of a group again.
func (c *Client) RetryGroup(ctx context.Context, id, key string) (*RetriedGroup, error) {
	var out RetriedGroup
	_, err := c.do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(id)+"/retry", retryBody(key), &out)
	return &out, err
}

func retryBody(key string) []byte {
	b, _ := json.Marshal(RetryRequest{Key: key})
	return b
}

// AuditEntry is one operator action of GET /v1/audit.
type AuditEntry struct {
	At      time.Time `json:"at"`
	Action  string    `json:"action"` // canceled, retried, schedule_set, ...
	Subject string    `json:"subject"`
	By      string    `json:"by"`
	Fields  []string  `json:"fields,omitempty"` // schedule_updated: the settings it changed
}

// Audit returns the mesh's audit trail, newest first (at most limit; 0 =
// the server's default).
func (c *Client) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	var out struct {
		Entries []AuditEntry `json:"entries"`
	}
	path := "/v1/audit"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Entries, err
}
