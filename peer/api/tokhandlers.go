package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/needle-mesh/needle/shard"
)

// A token limited to handlers (handlers=, Token.Handlers) with the submit
// scope may create, retry and cancel tasks of those handlers only, and
// create, change, fire, pause, resume and delete schedules of them only.
// Each check runs before the route writes anything: a refused request
// leaves no task, no event and no part of a group. Reads are not limited
// (docs/decisions.md, "A submit token may be limited to handlers, where
// work is made or changed").

// limited returns the token of r when it is limited to handlers; a token
// without handlers=, or an API without tokens, checks nothing, and costs
// no read.
func limited(r *http.Request) (Token, bool) {
	tok, ok := TokenOf(r)
	return tok, ok && tok.Handlers != nil
}

// mayCreate is nil when r's token may use every handler of spec, else the
// 403 naming the first it may not by its path in the request: prefix
// ("group" for a schedule's template) joined with the task's path as a
// field error would name it ("handler", "tasks[3].handler",
// "stages[1].handler").
func mayCreate(r *http.Request, spec *shard.GroupSpec, prefix, doing string) error {
	tok, ok := limited(r)
	if !ok {
		return nil
	}
	for i := range spec.Tasks {
		if h := spec.Tasks[i].Handler; !tok.MayUse(h) {
			field := join(prefix, CorePath(spec, &shard.FieldError{Task: i, Field: "handler"}))
			return handlerForbidden(tok, field, doing, h)
		}
	}
	return nil
}

// mayActOnTask is nil when r's token may act on task id (its handler is
// the token's), else the 403 naming "handler" (the task's field, as GET
// shows it). A task's handler never changes, so the check cannot go
// stale before the action.
func (s *server) mayActOnTask(r *http.Request, id shard.TaskID, doing string) error {
	tok, ok := limited(r)
	if !ok {
		return nil
	}
	v, err := s.b.Task(r.Context(), id, 0)
	if err != nil {
		return err
	}
	if !tok.MayUse(v.Handler) {
		return handlerForbidden(tok, "handler", doing, v.Handler)
	}
	return nil
}

// mayActOnGroup is nil when r's token may act on every task of group id,
// else the 403 naming the first it may not ("tasks[i].handler", as GET
// shows the group): a group's cancel or retry reaches all its tasks.
func (s *server) mayActOnGroup(r *http.Request, id shard.GroupID, doing string) error {
	tok, ok := limited(r)
	if !ok {
		return nil
	}
	v, err := s.b.Group(r.Context(), id, 0, true)
	if err != nil {
		return err
	}
	for i, t := range v.Tasks {
		if !tok.MayUse(t.Handler) {
			return handlerForbidden(tok, fmt.Sprintf("tasks[%d].handler", i), doing, t.Handler)
		}
	}
	return nil
}

// mayActOnSchedule is nil when r's token may act on schedule id (every
// handler of its group template is the token's), else the 403 naming the
// template's field ("group.tasks[0].handler", as GET shows it).
func (s *server) mayActOnSchedule(r *http.Request, id shard.ScheduleID, doing string) error {
	if _, ok := limited(r); !ok {
		return nil
	}
	v, err := s.sb().Schedule(r.Context(), id)
	if err != nil {
		return err
	}
	return mayCreate(r, &v.Spec.Group, "group", doing)
}

// watchToken returns the context of long poll r, which ends once its
// token is revoked or no longer grants need when the token set changes
// (Tokens.Watch), and the check that says why (nil: an API without
// tokens, whose context is r's). Call stop when the poll is done.
func (s *server) watchToken(r *http.Request, need Scope) (ctx context.Context, check func() error, stop func()) {
	if s.opts.Tokens == nil {
		return r.Context(), nil, func() {}
	}
	check = s.opts.Tokens.Recheck(r, need)
	ctx, stop = s.opts.Tokens.Watch(r.Context(), check)
	return ctx, check, stop
}

// revoked answers the 401 or 403 of check, and reports true, when the
// token of a long poll was revoked or narrowed while it waited: the
// answer a new request with it would get, not what the wait found.
func revoked(w http.ResponseWriter, check func() error) bool {
	if check == nil {
		return false
	}
	err := check()
	if err == nil {
		return false
	}
	e := ErrorOf(err)
	writeAuthErr(w, e)
	return true
}
