package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// TriggerBackend fires schedules by hand. A Backend that also implements it
// gets POST /v1/schedules/{id}/trigger. Errors as for Backend.
type TriggerBackend interface {
	// TriggerSchedule fires schedule id now, without moving its next tick.
	// key, when set, makes the request idempotent: a repeat returns the
	// same firing (Created false) while it is among the schedule's recent
	// firings. by names who asked (audit trail).
	TriggerSchedule(ctx context.Context, id shard.ScheduleID, key, by string) (shard.ScheduleView, SubmitResult, error)
}

// TriggerRequest is the optional body of POST /v1/schedules/{id}/trigger.
type TriggerRequest struct {
	Key string `json:"key,omitempty"` // idempotency key
}

// TriggerResponse is the body of a successful trigger (201, or 200 for a
// repeated key).
type TriggerResponse struct {
	Schedule string            `json:"schedule"` // the schedule id
	Group    string            `json:"group"`    // the firing's group: <schedule>~<unix seconds>~<tag>
	Tasks    map[string]string `json:"tasks"`    // task name -> task id
	Next     *time.Time        `json:"next,omitempty"`
	Created  bool              `json:"-"`
}

func (s *server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	id, err := scheduleID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, err := readBody(s.body(w, r), s.opts.Limits.withDefaults().MaxBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req TriggerRequest
	if len(bytes.TrimSpace(data)) > 0 {
		if err := decodeStrict(data, &req, ""); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if len(req.Key) > maxKeyLen {
		s.fail(w, r, fieldErr("key", "longer than %d bytes", maxKeyLen))
		return
	}
	if req.Key == "" && len(bytes.TrimSpace(data)) > 0 && hasEmptyKey(data) {
		s.fail(w, r, errEmptyKey("key"))
		return
	}
	if err := s.mayActOnSchedule(r, id, "fire only schedules of"); err != nil {
		s.fail(w, r, err)
		return
	}
	v, res, err := s.b.(TriggerBackend).TriggerSchedule(r.Context(), id, req.Key, s.by(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := TriggerResponse{Schedule: string(id), Group: string(res.Group), Tasks: map[string]string{}, Next: timePtr(v.Next)}
	// A broadcast's copies are named by the peers matched at the firing,
	// not by the template: read them with GET /v1/groups/{group}.
	if tasks := v.Spec.Group.Tasks; len(res.Tasks) == len(tasks) && v.Spec.Group.Mode != shard.ModeBroadcast {
		for i, t := range res.Tasks {
			out.Tasks[tasks[i].Name] = string(t)
		}
	}
	w.Header().Set("Location", "/v1/groups/"+url.PathEscape(string(res.Group)))
	writeJSON(w, createdStatus(res), out)
}

// TriggerSchedule fires a schedule now; key (optional) makes a retry safe.
func (c *Client) TriggerSchedule(ctx context.Context, id, key string) (*TriggerResponse, error) {
	body, err := json.Marshal(TriggerRequest{Key: key})
	if err != nil {
		return nil, err
	}
	var out TriggerResponse
	status, err := c.do(ctx, "POST", "/v1/schedules/"+url.PathEscape(id)+"/trigger", body, &out)
	out.Created = status == http.StatusCreated
	return &out, err
}
