package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// routes serves the fake's part of docs/api.md.
func (p *fakePeer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /v1/peers", p.handlePeers)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		p.mesh.mu.Lock()
		p.cpu += 0.01
		cpu := p.cpu
		p.mesh.mu.Unlock()
		fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", cpu)
	})
	mux.HandleFunc("POST /v1/peers/{id}/forget", func(w http.ResponseWriter, r *http.Request) {
		p.mesh.mu.Lock()
		if p.mesh.forgets == nil {
			p.mesh.forgets = map[string]int{}
		}
		p.mesh.forgets[r.PathValue("id")]++
		repeat := p.mesh.forgets[r.PathValue("id")] > 1
		p.mesh.mu.Unlock()
		if repeat { // gossip spread the first: as needled, forgotten already
			writeErr(w, http.StatusNotFound, "not_found", "peer "+r.PathValue("id")+" was forgotten already: a forgotten id never comes back; nothing to do")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"forgotten": r.PathValue("id")})
	})
	mux.HandleFunc("POST /v1/tasks", p.handleSubmitTask)
	mux.HandleFunc("POST /v1/groups", p.handleSubmitGroup)
	mux.HandleFunc("GET /v1/tasks/{id}", p.handleGetTask)
	mux.HandleFunc("GET /v1/groups/{id}", p.handleGetGroup)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (p *fakePeer) handlePeers(w http.ResponseWriter, _ *http.Request) {
	m := p.mesh
	m.mu.Lock()
	var list []map[string]any
	for _, q := range m.peers {
		state := "alive"
		if q.dead {
			state = "dead"
		}
		list = append(list, map[string]any{"id": q.id, "addrs": q.spec.Listen, "state": state})
	}
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"self": p.id, "peers": list})
}

func (p *fakePeer) handleSubmitTask(w http.ResponseWriter, r *http.Request) {
	var t TaskSpec
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil || t.Handler == "" {
		writeErr(w, http.StatusBadRequest, "invalid_argument", "handler: required")
		return
	}
	g := p.mesh.submit("single", []TaskSpec{t})
	writeJSON(w, http.StatusCreated, map[string]string{"id": g.tasks[0].id, "group": g.id})
}

func (p *fakePeer) handleSubmitGroup(w http.ResponseWriter, r *http.Request) {
	var spec GroupSpec
	if err := json.NewDecoder(r.Body).Decode(&spec); err != nil || len(spec.Tasks) == 0 {
		writeErr(w, http.StatusBadRequest, "invalid_argument", "tasks: required")
		return
	}
	g := p.mesh.submit(spec.Mode, spec.Tasks)
	ids := map[string]string{}
	for i, t := range spec.Tasks {
		ids[t.Name] = g.tasks[i].id
	}
	writeJSON(w, http.StatusCreated, map[string]any{"group": g.id, "tasks": ids})
}

func (p *fakePeer) handleGetTask(w http.ResponseWriter, r *http.Request) {
	p.longPoll(w, r, func() (any, bool, error) {
		t, ok := p.mesh.tasks[r.PathValue("id")]
		if !ok {
			return nil, false, errFakeNotFound
		}
		return t.view(), terminal(t.state), nil
	})
}

func (p *fakePeer) handleGetGroup(w http.ResponseWriter, r *http.Request) {
	p.longPoll(w, r, func() (any, bool, error) {
		g, ok := p.mesh.groups[r.PathValue("id")]
		if !ok {
			return nil, false, errFakeNotFound
		}
		v := g.view()
		return v, terminal(v.State), nil
	})
}

// longPoll answers view() (called with mesh.mu held) once it is terminal
// or the request's ?wait= ends.
func (p *fakePeer) longPoll(w http.ResponseWriter, r *http.Request, view func() (any, bool, error)) {
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	m := p.mesh
	for {
		m.mu.Lock()
		v, done, err := view()
		ch := m.changed
		m.mu.Unlock()
		if err != nil {
			writeErr(w, http.StatusNotFound, "not_found", err.Error())
			return
		}
		if done || wait <= 0 {
			writeJSON(w, http.StatusOK, v)
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			wait = 0
		case <-r.Context().Done():
			return
		}
	}
}

func (t *fakeTask) view() Task {
	v := Task{ID: t.id, Group: t.group, Handler: t.handler, State: t.state, Attempt: t.attempt,
		Round: t.round, Peer: t.peer, Result: t.result, StartedAt: Time{t.started}, FinishedAt: Time{t.finished}}
	if t.errMsg != "" {
		v.Error = t.errMsg
	}
	return v
}

func (g *fakeGroup) view() Group {
	v := Group{ID: g.id, Mode: g.mode, Counts: map[string]int{}}
	for _, t := range g.tasks {
		v.Counts[t.state]++
		v.Tasks = append(v.Tasks, t.view())
	}
	switch {
	case v.Counts["SUCCEEDED"] == len(g.tasks):
		v.State = "SUCCEEDED"
	case v.Counts["SUCCEEDED"]+v.Counts["FAILED"]+v.Counts["CANCELED"] == len(g.tasks):
		v.State = "FAILED"
	default:
		v.State = "RUNNING"
	}
	return v
}
