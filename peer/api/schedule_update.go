package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// UpdateBackend is what PATCH /v1/schedules/{id} asks of a peer. A
// ScheduleBackend that also implements it gets the route.
type UpdateBackend interface {
	// UpdateSchedule gives schedule spec.ID the settings of spec (its
	// pause state is kept) in one committed event, and returns it as it
	// is then. base is the revision (shard.ScheduleRevision) spec was
	// made from: another is shard.ErrRevision; 0 = any. by names who
	// asked, for the audit trail.
	UpdateSchedule(ctx context.Context, spec *shard.ScheduleSpec, base uint64, by string) (shard.ScheduleView, error)
}

// UpdateScheduleRequest is the body of PATCH /v1/schedules/{id}: the
// settings to change, each as in CreateScheduleRequest; an absent one is
// kept. Setting Cron clears Every and the other way round. Group is a whole
// group template (a POST /v1/groups body), not a patch of it.
type UpdateScheduleRequest struct {
	Name     *string         `json:"name,omitempty"`
	Cron     *string         `json:"cron,omitempty"`
	Every    *string         `json:"every,omitempty"`
	Timezone *string         `json:"timezone,omitempty"`
	Overlap  *string         `json:"overlap,omitempty"`
	Misfire  *string         `json:"misfire,omitempty"`
	Group    json.RawMessage `json:"group,omitempty"`
	// Revision, when set, is the revision (Schedule.Revision) the change
	// was made from, as the If-Match header: another is a 412.
	Revision string `json:"revision,omitempty"`
	// Paused is refused: pause and resume have their own routes.
	Paused *bool `json:"paused,omitempty"`
}

// DecodeScheduleUpdate reads the body of PATCH /v1/schedules/{id}. Errors
// are *FieldError naming the field: an unknown one, cron and every both
// set, paused, or nothing to change.
func DecodeScheduleUpdate(r io.Reader, lim Limits) (*UpdateScheduleRequest, error) {
	lim = lim.withDefaults()
	data, err := readBody(r, lim.MaxBody)
	if err != nil {
		return nil, err
	}
	var u UpdateScheduleRequest
	if err := decodeStrict(data, &u, ""); err != nil {
		return nil, err
	}
	switch {
	case u.Paused != nil:
		return nil, fieldErr("paused", "not changed by an update: POST /v1/schedules/{id}/pause or /resume")
	case u.Cron != nil && u.Every != nil:
		return nil, fieldErr("every", "set either cron or every, not both")
	case u.Name == nil && u.Cron == nil && u.Every == nil && u.Timezone == nil && u.Overlap == nil &&
		u.Misfire == nil && len(u.Group) == 0:
		return nil, fieldErr("", "nothing to change; set at least one of name, cron, every, timezone, overlap, misfire, group")
	}
	if _, err := ParseRevision(u.Revision); err != nil {
		return nil, fieldErr("revision", "%v", err)
	}
	return &u, nil
}

// Merge returns the settings of cur changed by u, validated exactly as a
// POST /v1/schedules of them would be (the same errors, naming the same
// fields). cur's id and pause state are kept.
func (u *UpdateScheduleRequest) Merge(cur *shard.ScheduleSpec, lim Limits) (*shard.ScheduleSpec, error) {
	lim = lim.withDefaults()
	rs := CreateScheduleRequest{Name: cur.Name, Cron: cur.Cron, Timezone: cur.TZ,
		Overlap: cur.Overlap.String(), Misfire: cur.Misfire.String()}
	if cur.Every > 0 {
		rs.Every = cur.Every.String()
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&rs.Name, u.Name)
	set(&rs.Timezone, u.Timezone)
	set(&rs.Overlap, u.Overlap)
	set(&rs.Misfire, u.Misfire)
	if u.Cron != nil {
		rs.Cron, rs.Every = *u.Cron, ""
		if *u.Cron == "" {
			return nil, fieldErr("cron", "required; to tick at an interval, set every instead")
		}
	}
	if u.Every != nil {
		rs.Every, rs.Cron = *u.Every, ""
		if *u.Every == "" {
			return nil, fieldErr("every", "required; to tick on a calendar, set cron instead")
		}
	}
	var g *shard.GroupSpec
	if len(u.Group) == 0 {
		keep := cur.Group
		keep.Tasks = append([]shard.TaskSpec(nil), cur.Group.Tasks...)
		g = &keep
	} else {
		rs.Group = u.Group
	}
	sp, err := buildSchedule(&rs, g, lim)
	if err != nil {
		return nil, err
	}
	sp.ID, sp.Paused = cur.ID, cur.Paused
	return sp, nil
}

// Revision formats a schedule's revision as the API shows it (and as its
// ETag quotes it): 16 hex digits.
func Revision(sp *shard.ScheduleSpec) string {
	return fmt.Sprintf("%016x", shard.ScheduleRevision(sp))
}

// ParseRevision parses a revision: as Revision writes it, quoted or not
// (an ETag); "" and "*" are 0 (any).
func ParseRevision(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	s = strings.Trim(s, `"`)
	if s == "" || s == "*" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v == 0 {
		return 0, &FieldError{Message: "malformed revision " + strconv.Quote(s) + "; want the revision of GET /v1/schedules/{id}"}
	}
	return v, nil
}

// updateSchedule is PATCH /v1/schedules/{id}. The edge reads the schedule,
// merges the change and validates the result as a create; the owner
// applies it only if the schedule is still at the revision read (or the
// one the client named: If-Match or revision). Without one, a change that
// raced with another is merged again on the newer settings (last writer
// wins, field by field).
func (s *server) updateSchedule(w http.ResponseWriter, r *http.Request) {
	id, err := scheduleID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	u, err := DecodeScheduleUpdate(s.body(w, r), s.opts.Limits)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	want, _ := ParseRevision(u.Revision)
	if h := r.Header.Get("If-Match"); h != "" {
		hv, err := ParseRevision(h)
		if err != nil {
			s.fail(w, r, &FieldError{Field: "If-Match", Message: err.Error()})
			return
		}
		if want != 0 && hv != 0 && hv != want {
			s.fail(w, r, fieldErr("revision", "differs from the If-Match header"))
			return
		}
		want = max(want, hv)
	}
	ub := s.b.(UpdateBackend)
	for try := 0; ; try++ {
		cur, err := s.sb().Schedule(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		// Both the schedule as it is and as it would be: a limited token
		// changes neither another handler's schedule nor its own into one.
		if err := mayCreate(r, &cur.Spec.Group, "group", "change only schedules of"); err != nil {
			s.fail(w, r, err)
			return
		}
		base := shard.ScheduleRevision(&cur.Spec)
		if want != 0 && want != base {
			s.fail(w, r, shard.ErrRevision)
			return
		}
		spec, err := u.Merge(&cur.Spec, s.opts.Limits)
		if err == nil {
			err = mayCreate(r, &spec.Group, "group", "schedule only tasks of")
		}
		if err == nil && len(u.Group) > 0 && shard.ToWorkers(&spec.Group) {
			err = s.checkScheduleToWorkers(r.Context(), spec)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		v, err := ub.UpdateSchedule(r.Context(), spec, base, s.by(r))
		if err != nil && want == 0 && try < 2 && errors.Is(err, shard.ErrRevision) {
			continue // changed since read: merge again onto the newer settings
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("ETag", `"`+Revision(&v.Spec)+`"`)
		writeJSON(w, http.StatusOK, NewSchedule(v))
		return
	}
}

// UpdateSchedule patches a schedule (PATCH /v1/schedules/{id}); ifMatch,
// when not "", is the revision it must be at.
func (c *Client) UpdateSchedule(ctx context.Context, id string, req *UpdateScheduleRequest, ifMatch string) (*Schedule, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out Schedule
	_, err = c.doHeader(ctx, "PATCH", "/v1/schedules/"+url.PathEscape(id), body, &out, "If-Match", ifMatch)
	return &out, err
}
