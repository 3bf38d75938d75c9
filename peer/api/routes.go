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
	if wait > 0 {
		release, ok := s.holdWait(w, r, "wait")
		if !ok {
			return
		}
		defer release()
	}
	v, err := s.b.Task(r.Context(), id, wait)
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
	if wait > 0 {
		release, ok := s.holdWait(w, r, "wait")
		if !ok {
			return
		}
		defer release()
	}
	v, err := s.b.Group(r.Context(), id, wait, withTasks)
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
	v, err := s.b.CancelGroup(r.Context(), id, s.by(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewGroup(v, true))
}
