package api

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// routeParams are the query parameters each route takes, by its
// "METHOD /path" pattern: any other is a 400 naming it, on every route (a
// route's handler may check more, such as a list's values). A route served
// here that is missing from the table takes none.
var routeParams = map[string][]string{
	"POST /v1/tasks":          {"wait"},
	"GET /v1/tasks/{id}":      {"wait"},
	"GET /v1/groups/{id}":     {"wait", "tasks"},
	"GET /v1/tasks":           listParamNames,
	"GET /v1/groups":          listParamNames,
	"GET /v1/tasks/{id}/logs": {"attempt", "follow"},
}

// listParamNames are the parameters of the lists, in the order their
// error names them.
var listParamNames = []string{"state", "handler", "mode", "schedule", "peer", "label",
	"created_after", "created_before", "finished_after", "finished_before", "worker_deaths", "q", "limit", "cursor"}

// checkParams refuses a parameter of q not in names (the route's, for
// pattern "METHOD /path"): a *FieldError naming it, and what the route
// takes.
func checkParams(q url.Values, pattern string, names []string) error {
	for _, k := range slices.Sorted(mapKeys(q)) {
		switch {
		case k == "":
			return fieldErr("query", "a parameter without a name")
		case slices.Contains(names, k):
		case len(names) == 0:
			return fieldErr(k, "unknown parameter (%s takes none)", pattern)
		default:
			return fieldErr(k, "unknown parameter (want %s)", strings.Join(names, ", "))
		}
	}
	return nil
}

// OnlyParams serves h only to a request whose query parameters are among
// names (none: no parameter); pattern ("METHOD /path") names the route in
// the error, a 400 invalid_argument naming the first unknown parameter, as
// on every route of NewHandler.
func OnlyParams(pattern string, h http.Handler, names ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkParams(r.URL.Query(), pattern, names); err != nil {
			e, _ := toError(err)
			writeErr(w, e)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// maxNoBody bounds what a route that takes no body reads of one.
const maxNoBody = 4096

// checkNoBody refuses a body on a route that takes none, as the heartbeat
// does: empty (or {}) is taken, anything else is a 400 naming the unknown
// field, or saying the JSON is malformed. Without it a destructive route
// ignored what it was sent: POST /v1/drain {"peer": "<another id>"}
// drained the peer asked, not the one named.
func checkNoBody(w http.ResponseWriter, r *http.Request) error {
	data, err := readBody(http.MaxBytesReader(w, r.Body, maxNoBody), maxNoBody)
	if err != nil {
		return &FieldError{Message: fmt.Sprintf("this route takes no body (or {}), got over %d bytes", maxNoBody)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var v struct{}
	return decodeStrict(data, &v, "")
}

// NoBody serves h only to a request with no body, or {} (checkNoBody);
// another body is a 400 invalid_argument, and h is not called.
func NoBody(h http.Handler) http.HandlerFunc {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkNoBody(w, r); err != nil {
			e, _ := toError(err)
			writeErr(w, e)
			return
		}
		h.ServeHTTP(w, r)
	})
}
