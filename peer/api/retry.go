package api

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// Retrier is what a Backend implements to run FAILED and CANCELED tasks
// again (POST /v1/tasks/{id}/retry, POST /v1/groups/{id}/retry). A task or
// group with nothing to retry is ErrConflict (409) naming its state; an
// unknown id is shard.ErrNotFound. repeat reports a key the group had
// seen: the retry did nothing, and the view is the current state.
type Retrier interface {
	RetryTask(ctx context.Context, id shard.TaskID, by, key string) (v shard.TaskView, repeat bool, err error)
	RetryGroup(ctx context.Context, id shard.GroupID, by, key string) (v shard.GroupView, repeat bool, err error)
}

// RetriedTask is the answer to a task's retry: the task, and whether the
// retry's key made it a repeat of an earlier one (nothing ran again).
type RetriedTask struct {
	Task
	Repeat bool `json:"repeat,omitempty"`
}

// RetriedGroup is the answer to a group's retry (as RetriedTask).
type RetriedGroup struct {
	Group
	Repeat bool `json:"repeat,omitempty"`
}

// RetryRequest is the optional body of a retry: a key makes it idempotent
// (the same key again does nothing and answers the current state).
type RetryRequest struct {
	Key string `json:"key,omitempty"`
}

// maxRetryKey bounds a retry's idempotency key.
const maxRetryKey = 200

func (s *server) retryRoutes(rt Retrier) []route {
	return []route{
		{"POST", "/v1/tasks/{id}/retry", ScopeSubmit, func(w http.ResponseWriter, r *http.Request) { s.retryTask(w, r, rt) }},
		{"POST", "/v1/groups/{id}/retry", ScopeSubmit, func(w http.ResponseWriter, r *http.Request) { s.retryGroup(w, r, rt) }},
	}
}

// retryKey reads the optional body of a retry.
func (s *server) retryKey(w http.ResponseWriter, r *http.Request) (string, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
	if err != nil {
		return "", fieldErr("key", "request body over 4096 bytes")
	}
	if strings.TrimSpace(string(data)) == "" {
		return "", nil
	}
	var req RetryRequest
	if err := decodeStrict(data, &req, ""); err != nil {
		return "", err
	}
	if len(req.Key) > maxRetryKey {
		return "", fieldErr("key", "longer than %d bytes", maxRetryKey)
	}
	if req.Key == "" && hasEmptyKey(data) {
		return "", errEmptyKey("key")
	}
	return req.Key, nil
}

func (s *server) retryTask(w http.ResponseWriter, r *http.Request, rt Retrier) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, err := s.retryKey(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayActOnTask(r, id, "retry only tasks of"); err != nil {
		s.fail(w, r, err)
		return
	}
	v, repeat, err := rt.RetryTask(r.Context(), id, s.by(r), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RetriedTask{NewTask(v), repeat})
}

func (s *server) retryGroup(w http.ResponseWriter, r *http.Request, rt Retrier) {
	id, err := groupID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, err := s.retryKey(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayActOnGroup(r, id, "retry only tasks of"); err != nil {
		s.fail(w, r, err)
		return
	}
	v, repeat, err := rt.RetryGroup(r.Context(), id, s.by(r), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RetriedGroup{NewGroup(v, true), repeat})
}
