package api

import (
	"net/http"
	"strconv"
)

func (s *server) getTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait, err := s.wait(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var check func() error // nil: nothing to re-check (no wait, or no tokens)
	if wait > 0 {
		release, ok := s.holdWait(w, r, "wait")
		if !ok {
			return
		}
		defer release()
		// A token revoked (or left without read) while the wait holds
		// ends it at once, as a worker's waiting poll is ended.
		var stop func()
		ctx, check, stop = s.watchToken(r, ScopeRead)
		defer stop()
	}
	v, err := s.b.Task(ctx, id, wait)
	if revoked(w, check) {
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewTask(v))
}

func (s *server) taskEvents(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	evs, err := s.b.TaskEvents(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewEvents(evs))
}

func (s *server) cancelTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayActOnTask(r, id, "cancel only tasks of"); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.b.CancelTask(r.Context(), id, s.by(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewTask(v))
}

func (s *server) getGroup(w http.ResponseWriter, r *http.Request) {
	id, err := groupID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait, err := s.wait(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withTasks := true
	if q := r.URL.Query().Get("tasks"); q != "" {
		if withTasks, err = strconv.ParseBool(q); err != nil {
			s.fail(w, r, fieldErr("tasks", "invalid boolean %q", q))
			return
		}
	}
	ctx := r.Context()
	var check func() error // nil: nothing to re-check (no wait, or no tokens)
	if wait > 0 {
		release, ok := s.holdWait(w, r, "wait")
		if !ok {
			return
		}
		defer release()
		// A token revoked (or left without read) while the wait holds
		// ends it at once, as a worker's waiting poll is ended.
		var stop func()
		ctx, check, stop = s.watchToken(r, ScopeRead)
		defer stop()
	}
	v, err := s.b.Group(ctx, id, wait, withTasks)
	if revoked(w, check) {
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewGroup(v, withTasks))
}

func (s *server) cancelGroup(w http.ResponseWriter, r *http.Request) {
	id, err := groupID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayActOnGroup(r, id, "cancel only tasks of"); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.b.CancelGroup(r.Context(), id, s.by(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewGroup(v, true))
}
