package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
)

// ScheduleBackend is what the schedule routes ask of a peer. A Backend that
// also implements it gets /v1/schedules. Errors as for Backend.
type ScheduleBackend interface {
	// CreateSchedule creates the schedule (or finds the one created earlier
	// with the same key; created is then false). It assigns the id.
	// by names who asked, for the audit trail.
	CreateSchedule(ctx context.Context, spec *shard.ScheduleSpec, key, by string) (v shard.ScheduleView, created bool, err error)
	Schedule(ctx context.Context, id shard.ScheduleID) (shard.ScheduleView, error)
	// Schedules lists every schedule of the mesh, sorted by id.
	Schedules(ctx context.Context) ([]shard.ScheduleView, error)
	// DeleteSchedule deletes a schedule and returns it as it was.
	DeleteSchedule(ctx context.Context, id shard.ScheduleID, by string) (shard.ScheduleView, error)
	// PauseSchedule pauses (pause) or resumes a schedule.
	PauseSchedule(ctx context.Context, id shard.ScheduleID, pause bool, by string) (shard.ScheduleView, error)
}

// CreateScheduleRequest is the body of POST /v1/schedules. Exactly one of
// Cron and Every is set.
type CreateScheduleRequest struct {
	Name     string          `json:"name,omitempty"`
	Cron     string          `json:"cron,omitempty"`     // 5 fields, 6 with leading seconds, or @daily etc.
	Every    string          `json:"every,omitempty"`    // Go duration, >= 1s
	Timezone string          `json:"timezone,omitempty"` // IANA name of Cron's zone; default UTC
	Overlap  string          `json:"overlap,omitempty"`  // skip (default) | allow
	Misfire  string          `json:"misfire,omitempty"`  // once (default) | skip
	Paused   bool            `json:"paused,omitempty"`
	Key      string          `json:"key,omitempty"` // idempotency key
	Group    json.RawMessage `json:"group"`         // a POST /v1/groups body
}

// Schedule is a schedule as the API shows it.
type Schedule struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Cron     string `json:"cron,omitempty"`
	Every    string `json:"every,omitempty"`
	Timezone string `json:"timezone"`
	Overlap  string `json:"overlap"`
	Misfire  string `json:"misfire"`
	Paused   bool   `json:"paused"`
	// Revision identifies the schedule's settings (not its pause state
	// nor firings); PATCH takes it in If-Match or its revision field.
	Revision  string           `json:"revision"`
	Next      *time.Time       `json:"next,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	Group     ScheduleGroup    `json:"group"`
	Firings   []ScheduleFiring `json:"firings"`
	// Created is false when CreateSchedule's request repeated an earlier
	// key (HTTP 200 instead of 201). It is not part of the body.
	Created bool `json:"-"`
}

// ScheduleGroup summarizes a schedule's group template.
type ScheduleGroup struct {
	Mode     string   `json:"mode"`
	To       string   `json:"to,omitempty"` // a broadcast's target: peers or workers
	Handlers []string `json:"handlers"`     // per task
}

// ScheduleFiring is one recent firing: its tick, the group it created and
// that group's state ("SKIPPED" when the overlap policy skipped the tick,
// "REMOVED" when retention removed the group).
type ScheduleFiring struct {
	At    time.Time `json:"at"`
	Group string    `json:"group,omitempty"`
	State string    `json:"state"`
	// Manual is true for a firing made by POST /v1/schedules/{id}/trigger
	// (At is when it was asked).
	Manual bool `json:"manual,omitempty"`
}

// ScheduleList is GET /v1/schedules.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

// NewSchedule converts a view to its API form.
func NewSchedule(v shard.ScheduleView) Schedule {
	sp := v.Spec
	s := Schedule{ID: string(sp.ID), Name: sp.Name, Cron: sp.Cron, Timezone: sp.TZ, Overlap: sp.Overlap.String(),
		Misfire: sp.Misfire.String(), Paused: v.Paused, Revision: Revision(&sp), CreatedAt: v.CreatedAt.UTC(),
		Group: ScheduleGroup{Mode: sp.Group.Mode.String()}, Firings: []ScheduleFiring{}}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	if sp.Every > 0 {
		s.Every = sp.Every.String()
	}
	if !v.Next.IsZero() {
		n := v.Next.UTC()
		s.Next = &n
	}
	for _, t := range sp.Group.Tasks {
		s.Group.Handlers = append(s.Group.Handlers, t.Handler)
	}
	if sp.Group.Mode == shard.ModeBroadcast {
		s.Group.To = ToPeers
		if shard.ToWorkers(&sp.Group) {
			s.Group.To = ToWorkers
		}
	}
	for _, f := range v.Firings {
		sf := ScheduleFiring{At: f.At.UTC(), Group: string(f.Group), Manual: f.Manual}
		switch {
		case f.Skipped:
			sf.State = "SKIPPED"
		case !f.Exists:
			sf.State = "REMOVED"
		default:
			sf.State = f.State.String()
		}
		s.Firings = append(s.Firings, sf)
	}
	return s
}

// DecodeSchedule reads the body of POST /v1/schedules, validates it (cron
// syntax, time zone, interval, the group body exactly as POST /v1/groups)
// and returns the spec (id empty) and its idempotency key. Errors are
// *FieldError naming the JSON path ("cron", "timezone", "every",
// "group.tasks[0].handler").
func DecodeSchedule(r io.Reader, lim Limits) (*shard.ScheduleSpec, string, error) {
	lim = lim.withDefaults()
	data, err := readBody(r, lim.MaxBody)
	if err != nil {
		return nil, "", err
	}
	var rs CreateScheduleRequest
	if err := decodeStrict(data, &rs, ""); err != nil {
		return nil, "", err
	}
	if len(rs.Key) > maxKeyLen {
		return nil, "", fieldErr("key", "longer than %d bytes", maxKeyLen)
	}
	if rs.Key == "" && hasEmptyKey(data) {
		return nil, "", errEmptyKey("key")
	}
	sp, err := buildSchedule(&rs, nil, lim)
	if err != nil {
		return nil, "", err
	}
	return sp, rs.Key, nil
}

// buildSchedule validates a create request's settings (all but its key)
// and returns the schedule's spec (id empty). g is its group template when
// it is known already (an update that keeps it), nil to decode rs.Group.
func buildSchedule(rs *CreateScheduleRequest, g *shard.GroupSpec, lim Limits) (*shard.ScheduleSpec, error) {
	sp := &shard.ScheduleSpec{Name: rs.Name, Cron: rs.Cron, TZ: rs.Timezone, Paused: rs.Paused}
	switch {
	case len(rs.Name) > maxNameLen:
		return nil, fieldErr("name", "longer than %d bytes", maxNameLen)
	case rs.Cron != "" && rs.Every != "":
		return nil, fieldErr("cron", "set either cron or every, not both")
	case rs.Cron == "" && rs.Every == "":
		return nil, fieldErr("cron", "required (or every)")
	}
	if rs.Every != "" {
		d, err := time.ParseDuration(rs.Every)
		if err != nil {
			return nil, fieldErr("every", "invalid duration %q; want a Go duration like \"30s\"", rs.Every)
		}
		switch {
		case d < lim.MinEvery:
			return nil, fieldErr("every", "%s is under the minimum of %s", d, lim.MinEvery)
		case d > shard.MaxEvery:
			return nil, fieldErr("every", "%s is over the maximum of %s", d, shard.MaxEvery)
		}
		sp.Every = d
	}
	if _, err := cron.LoadLocation(rs.Timezone); err != nil {
		return nil, fieldErr("timezone", "unknown time zone %q; want an IANA name like \"Europe/Paris\"", rs.Timezone)
	}
	if rs.Cron != "" {
		if len(rs.Cron) > maxNameLen {
			return nil, fieldErr("cron", "longer than %d bytes", maxNameLen)
		}
		if err := cron.Parse(rs.Cron); err != nil {
			return nil, fieldErr("cron", "%v", err)
		}
		if next, _ := cron.Next(sp, time.Now()); next.IsZero() {
			return nil, fieldErr("cron", "%q never fires", rs.Cron)
		}
	}
	var ok bool
	if sp.Overlap, ok = shard.ParseOverlap(orDefault(rs.Overlap, "skip")); !ok {
		return nil, fieldErr("overlap", "unknown overlap %q; want skip or allow", rs.Overlap)
	}
	if sp.Misfire, ok = shard.ParseMisfire(orDefault(rs.Misfire, "once")); !ok {
		return nil, fieldErr("misfire", "unknown misfire %q; want once or skip", rs.Misfire)
	}
	if g == nil {
		var err error
		if g, err = decodeScheduleGroup(rs.Group, lim); err != nil {
			return nil, err
		}
	}
	sp.Group = *g
	if err := checkScheduleRate(sp, lim, time.Now()); err != nil {
		return nil, err
	}
	return sp, nil
}

// decodeScheduleGroup decodes a schedule's group template as POST
// /v1/groups decodes a group; errors name "group.<field>".
func decodeScheduleGroup(raw json.RawMessage, lim Limits) (*shard.GroupSpec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fieldErr("group", "required")
	}
	g, err := DecodeGroup(bytes.NewReader(raw), lim)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			c := *fe
			c.Field = join("group", fe.Field)
			return nil, &c
		}
		return nil, err
	}
	if g.Key != "" {
		return nil, fieldErr("group.key", "not allowed in a schedule; each firing's group id derives from the tick")
	}
	return g, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// scheduleRoutes returns the schedule routes when b implements them.
func (s *server) scheduleRoutes() []route {
	if _, ok := s.b.(ScheduleBackend); !ok {
		return nil
	}
	routes := []route{
		{"POST", "/v1/schedules", ScopeSubmit, s.createSchedule},
		{"GET", "/v1/schedules", ScopeRead, s.listSchedules},
		{"GET", "/v1/schedules/{id}", ScopeRead, s.getSchedule},
		// No body (or {}), as a cancel: a body was ignored, so that
		// DELETE {"id": "<another>"} deleted the schedule of the path.
		{"DELETE", "/v1/schedules/{id}", ScopeSubmit, NoBody(http.HandlerFunc(s.deleteSchedule))},
		{"POST", "/v1/schedules/{id}/pause", ScopeSubmit, NoBody(s.pauseSchedule(true))},
		{"POST", "/v1/schedules/{id}/resume", ScopeSubmit, NoBody(s.pauseSchedule(false))},
	}
	if _, ok := s.b.(TriggerBackend); ok {
		routes = append(routes, route{"POST", "/v1/schedules/{id}/trigger", ScopeSubmit, s.triggerSchedule})
	}
	if _, ok := s.b.(UpdateBackend); ok {
		routes = append(routes, route{"PATCH", "/v1/schedules/{id}", ScopeSubmit, s.updateSchedule})
	}
	return routes
}

func (s *server) sb() ScheduleBackend { return s.b.(ScheduleBackend) }

func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) {
	spec, key, err := DecodeSchedule(s.body(w, r), s.opts.Limits)
	if err == nil {
		err = mayCreate(r, &spec.Group, "group", "schedule only tasks of")
	}
	if err == nil && shard.ToWorkers(&spec.Group) {
		err = s.checkScheduleToWorkers(r.Context(), spec)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, created, err := s.sb().CreateSchedule(r.Context(), spec, key, s.by(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/schedules/"+string(v.Spec.ID))
	writeJSON(w, status, NewSchedule(v))
}

func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	vs, err := s.sb().Schedules(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ScheduleList{Schedules: make([]Schedule, 0, len(vs))}
	for _, v := range vs {
		out.Schedules = append(out.Schedules, NewSchedule(v))
	}
	writeJSON(w, http.StatusOK, out)
}

// scheduleID parses the {id} of a schedule route (UTF-8, as taskID).
func scheduleID(r *http.Request) (shard.ScheduleID, error) {
	id := r.PathValue("id")
	if !validScheduleID(id) { // ids.go
		return "", fieldErr("id", "malformed schedule id %.100q; want s and hex digits (24, as the mesh makes them)", id)
	}
	return shard.ScheduleID(id), nil
}

func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	id, err := scheduleID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.sb().Schedule(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("ETag", `"`+Revision(&v.Spec)+`"`)
	writeJSON(w, http.StatusOK, NewSchedule(v))
}

func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	id, err := scheduleID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayActOnSchedule(r, id, "delete only schedules of"); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.sb().DeleteSchedule(r.Context(), id, s.by(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewSchedule(v))
}

func (s *server) pauseSchedule(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := scheduleID(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		doing := "resume only schedules of"
		if pause {
			doing = "pause only schedules of"
		}
		if err := s.mayActOnSchedule(r, id, doing); err != nil {
			s.fail(w, r, err)
			return
		}
		v, err := s.sb().PauseSchedule(r.Context(), id, pause, s.by(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, NewSchedule(v))
	}
}

// CreateSchedule posts a schedule.
func (c *Client) CreateSchedule(ctx context.Context, req *CreateScheduleRequest) (*Schedule, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out Schedule
	status, err := c.do(ctx, "POST", "/v1/schedules", body, &out)
	out.Created = status == http.StatusCreated
	return &out, err
}

// ListSchedules lists the schedules of the mesh.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out ScheduleList
	_, err := c.do(ctx, "GET", "/v1/schedules", nil, &out)
	return out.Schedules, err
}

// GetSchedule returns one schedule with its recent firings.
func (c *Client) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	var out Schedule
	_, err := c.do(ctx, "GET", "/v1/schedules/"+url.PathEscape(id), nil, &out)
	return &out, err
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, id string) (*Schedule, error) {
	var out Schedule
	_, err := c.do(ctx, "DELETE", "/v1/schedules/"+url.PathEscape(id), nil, &out)
	return &out, err
}

// PauseSchedule pauses (pause) or resumes a schedule.
func (c *Client) PauseSchedule(ctx context.Context, id string, pause bool) (*Schedule, error) {
	op := "/resume"
	if pause {
		op = "/pause"
	}
	var out Schedule
	_, err := c.do(ctx, "POST", "/v1/schedules/"+url.PathEscape(id)+op, nil, &out)
	return &out, err
}
