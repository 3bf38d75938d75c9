package client

import (
	"encoding/json"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// The worker protocol on the wire (docs/api.md, "Workers").

// pollBody is the body of POST /v1/workers/poll.
type pollBody struct {
	Worker   string   `json:"worker"`
	Handlers []string `json:"handlers"`
	Max      int      `json:"max"`
	Wait     string   `json:"wait"`
	Labels   []string `json:"labels,omitempty"`
}

// workerTask is one task of a poll's answer: the task as GET
// /v1/tasks/{id} shows it, with what the handler needs and its lease.
type workerTask struct {
	api.Task
	Payload  json.RawMessage            `json:"payload"`
	Inputs   map[string]json.RawMessage `json:"inputs,omitempty"`
	Timeout  string                     `json:"timeout"`
	Lease    string                     `json:"lease"`
	Deadline time.Time                  `json:"deadline"`
	Shard    *int                       `json:"shard,omitempty"`
	Shards   *int                       `json:"shards,omitempty"`
}

// pollAnswer is the answer to a poll.
type pollAnswer struct {
	Tasks []workerTask `json:"tasks"`
}

// completeBody is the body of POST /v1/leases/{lease}/complete.
type completeBody struct {
	Result json.RawMessage `json:"result"`
}

// failBody is the body of POST /v1/leases/{lease}/fail.
type failBody struct {
	Error     string `json:"error"`
	Permanent bool   `json:"permanent"`
}

// logsBody is the body of POST /v1/leases/{lease}/logs.
type logsBody struct {
	Lines []string `json:"lines"`
}

// heartbeatAnswer is the answer to POST /v1/leases/{lease}/heartbeat.
type heartbeatAnswer struct {
	Canceled bool      `json:"canceled"`
	Deadline time.Time `json:"deadline"`
}

// codeLeaseLost is the error code of a report on a lease that is no longer
// current (HTTP 409).
const codeLeaseLost = "lease_lost"
