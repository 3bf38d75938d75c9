package peer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// The HTTP API's contract is docs/openapi.yaml (and its prose, docs/api.md).
// TestOpenAPIRoutes holds it against the routes a real peer serves, and
// TestOpenAPIExamples sends the requests below to a real peer and validates
// each request and its answer against the spec's schemas.
//
// To add a route: serve it, add its path to docs/openapi.yaml, its section
// (a heading or line naming "METHOD /path") to docs/api.md, and at least one
// example here.

// example is one request sent to a real peer, in order. Path and Body may
// name values saved by an earlier example as {name}.
type example struct {
	Route  string // the served pattern, "METHOD /path/{param}"
	Method string
	Path   string
	Body   string
	Type   string            // the body's Content-Type when not application/json
	Header map[string]string // more request headers
	Status int               // the status the peer must answer
	Save   map[string]string // name -> field of the JSON answer to keep ({name} in Path and Body)
	Holds  string            // a piece of the answer's body it must hold
}

var examples = []example{
	{Route: "GET /healthz", Method: "GET", Path: "/healthz", Status: 200},
	{Route: "GET /metrics", Method: "GET", Path: "/metrics", Status: 200},
	{Route: "GET /{$}", Method: "GET", Path: "/", Status: 200},
	{Route: "GET /dash/", Method: "GET", Path: "/dash/app.js", Status: 200},
	{Route: "/debug/pprof/", Method: "GET", Path: "/debug/pprof/cmdline", Status: 200},

	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 201,
		Body: `{"handler":"echo","payload":{"a":1},"priority":2,"timeout":"30s","retry":{"max_attempts":3,"backoff":"1s","max_backoff":"1m"},"key":"example-1"}`,
		Save: map[string]string{"task": "id", "taskgroup": "group"}},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 200,
		Body: `{"handler":"echo","payload":{"a":1},"priority":2,"timeout":"30s","retry":{"max_attempts":3,"backoff":"1s","max_backoff":"1m"},"key":"example-1"}`},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 409, Body: `{"handler":"echo","payload":{"a":2},"key":"example-1"}`},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 400, Body: `{"handler":"echo","timeout":"soon"}`},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 201,
		Body: `{"handler":"sleep","payload":{"ms":60000},"delay":"1h"}`, Save: map[string]string{"delayed": "id"}},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks?wait=10s", Status: 201, Body: `{"handler":"echo","payload":{"b":1}}`},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks?wait=soon", Status: 400, Body: `{"handler":"echo"}`},
	{Route: "GET /v1/tasks/{id}", Method: "GET", Path: "/v1/tasks/{task}?wait=10s", Status: 200},
	{Route: "GET /v1/tasks/{id}", Method: "GET", Path: "/v1/tasks/gdead.3", Status: 404},
	{Route: "GET /v1/tasks/{id}", Method: "GET", Path: "/v1/tasks/{task}?wait=forever", Status: 400},
	{Route: "GET /v1/tasks/{id}/events", Method: "GET", Path: "/v1/tasks/{task}/events", Status: 200},
	{Route: "POST /v1/tasks/{id}/cancel", Method: "POST", Path: "/v1/tasks/{delayed}/cancel", Status: 200},

	{Route: "POST /v1/groups", Method: "POST", Path: "/v1/groups", Status: 201,
		Body: `{"mode":"dag","tasks":[{"name":"fetch","handler":"echo","payload":1},{"name":"sum","handler":"echo","payload":2,"deps":["fetch"]}]}`,
		Save: map[string]string{"group": "group"}},
	{Route: "POST /v1/groups", Method: "POST", Path: "/v1/groups", Status: 201,
		Body: `{"mode":"pipeline","stages":[{"name":"parse","handler":"echo","concurrency":2},{"name":"load","handler":"echo"}],"items":[{"f":"a"},{"f":"b"}]}`,
		Save: map[string]string{"pipeline": "group"}},
	{Route: "POST /v1/groups", Method: "POST", Path: "/v1/groups", Status: 201,
		Body: `{"mode":"staged","stages":[[{"handler":"echo"},{"handler":"echo"}],[{"handler":"echo"}]]}`},
	{Route: "POST /v1/groups", Method: "POST", Path: "/v1/groups", Status: 400,
		Body: `{"mode":"dag","tasks":[{"name":"a","handler":"echo","deps":["c"]}]}`},
	{Route: "GET /v1/groups/{id}", Method: "GET", Path: "/v1/groups/{group}?wait=10s", Status: 200},
	{Route: "GET /v1/groups/{id}", Method: "GET", Path: "/v1/groups/{pipeline}?wait=10s&tasks=false", Status: 200},
	{Route: "POST /v1/groups/{id}/cancel", Method: "POST", Path: "/v1/groups/{group}/cancel", Status: 200},
	{Route: "POST /v1/tasks/{id}/retry", Method: "POST", Path: "/v1/tasks/{delayed}/retry", Status: 200, Body: `{"key":"again-1"}`},
	{Route: "POST /v1/tasks/{id}/retry", Method: "POST", Path: "/v1/tasks/{delayed}/retry", Status: 200, Body: `{"key":"again-1"}`}, // a repeat
	{Route: "POST /v1/tasks/{id}/retry", Method: "POST", Path: "/v1/tasks/{task}/retry", Status: 409},
	{Route: "GET /v1/tasks/{id}/logs", Method: "GET", Path: "/v1/tasks/{task}/logs?attempt=1", Status: 200},
	{Route: "GET /v1/tasks/{id}/logs", Method: "GET", Path: "/v1/tasks/{task}/logs?follow=true", Status: 200},
	{Route: "GET /v1/tasks/{id}/logs", Method: "GET", Path: "/v1/tasks/{task}/logs?attempt=0", Status: 400},
	{Route: "GET /v1/tasks/{id}/logs", Method: "GET", Path: "/v1/tasks/gdead.3/logs", Status: 404},
	{Route: "POST /v1/groups/{id}/retry", Method: "POST", Path: "/v1/groups/{pipeline}/retry", Status: 409},
	{Route: "GET /v1/tasks", Method: "GET", Path: "/v1/tasks?limit=3&state=SUCCEEDED", Status: 200},
	{Route: "GET /v1/groups", Method: "GET", Path: "/v1/groups?limit=2", Status: 200},
	{Route: "GET /v1/stats", Method: "GET", Path: "/v1/stats", Status: 200},

	{Route: "POST /v1/schedules", Method: "POST", Path: "/v1/schedules", Status: 201,
		Body: `{"name":"nightly","cron":"0 2 * * *","timezone":"Europe/Paris","overlap":"skip","misfire":"once","key":"nightly","group":{"mode":"parallel","tasks":[{"handler":"echo","payload":1}]}}`,
		Save: map[string]string{"schedule": "id"}},
	{Route: "POST /v1/schedules", Method: "POST", Path: "/v1/schedules", Status: 200,
		Body: `{"name":"nightly","cron":"0 2 * * *","timezone":"Europe/Paris","overlap":"skip","misfire":"once","key":"nightly","group":{"mode":"parallel","tasks":[{"handler":"echo","payload":1}]}}`},
	{Route: "POST /v1/schedules", Method: "POST", Path: "/v1/schedules", Status: 409,
		Body: `{"name":"nightly","cron":"0 3 * * *","timezone":"Europe/Paris","key":"nightly","group":{"mode":"parallel","tasks":[{"handler":"echo","payload":1}]}}`},
	{Route: "GET /v1/schedules", Method: "GET", Path: "/v1/schedules", Status: 200},
	{Route: "GET /v1/schedules/{id}", Method: "GET", Path: "/v1/schedules/{schedule}", Status: 200},
	{Route: "POST /v1/schedules/{id}/pause", Method: "POST", Path: "/v1/schedules/{schedule}/pause", Status: 200},
	{Route: "POST /v1/schedules/{id}/resume", Method: "POST", Path: "/v1/schedules/{schedule}/resume", Status: 200},
	{Route: "POST /v1/schedules/{id}/trigger", Method: "POST", Path: "/v1/schedules/{schedule}/trigger", Status: 201, Body: `{"key":"rerun-1"}`},
	{Route: "PATCH /v1/schedules/{id}", Method: "PATCH", Path: "/v1/schedules/{schedule}", Status: 200, Body: `{"cron":"0 3 * * *","name":"nightly-3am"}`},
	{Route: "PATCH /v1/schedules/{id}", Method: "PATCH", Path: "/v1/schedules/{schedule}", Status: 400, Body: `{"paused":true}`},
	{Route: "PATCH /v1/schedules/{id}", Method: "PATCH", Path: "/v1/schedules/{schedule}", Status: 412, Body: `{"name":"x"}`,
		Header: map[string]string{"If-Match": `"00000000000000a1"`}, Holds: `"code":"precondition_failed"`},
	{Route: "PATCH /v1/schedules/{id}", Method: "PATCH", Path: "/v1/schedules/sdead", Status: 404, Body: `{"name":"x"}`},
	{Route: "GET /v1/schedules/{id}", Method: "GET", Path: "/v1/schedules/{schedule}", Status: 200},
	{Route: "GET /v1/schedules", Method: "GET", Path: "/v1/schedules?limit=5", Status: 400, Holds: `"field":"limit"`},
	// pause, resume and delete take no body (or {}), as a cancel
	{Route: "POST /v1/schedules/{id}/pause", Method: "POST", Path: "/v1/schedules/{schedule}/pause", Status: 400, Body: `{"paused":false}`},
	{Route: "POST /v1/schedules/{id}/resume", Method: "POST", Path: "/v1/schedules/{schedule}/resume", Status: 415, Body: `{}`, Type: "text/plain"},
	{Route: "POST /v1/schedules/{id}/resume", Method: "POST", Path: "/v1/schedules/{schedule}/resume", Status: 200, Body: `{}`},
	{Route: "DELETE /v1/schedules/{id}", Method: "DELETE", Path: "/v1/schedules/{schedule}", Status: 400, Body: `{"id":"s0"}`},
	{Route: "DELETE /v1/schedules/{id}", Method: "DELETE", Path: "/v1/schedules/{schedule}", Status: 200},

	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 201,
		Body: `{"handler":"resize","payload":{"image":"cat.png","width":640}}`, Save: map[string]string{"xtask": "id"}},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-1","handlers":["resize","email"],"max":8,"wait":"10s","labels":["zone=a"]}`,
		Save: map[string]string{"lease": "tasks.0.lease"}},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-1","handlers":["resize"],"max":1,"wait":"10ms"}`},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 400, Body: `{"worker":"resizer-1","handlers":[]}`},
	{Route: "GET /v1/workers", Method: "GET", Path: "/v1/workers", Status: 200},
	{Route: "POST /v1/leases/{lease}/heartbeat", Method: "POST", Path: "/v1/leases/{lease}/heartbeat", Status: 200},
	{Route: "POST /v1/leases/{lease}/logs", Method: "POST", Path: "/v1/leases/{lease}/logs", Status: 200,
		Body: `{"lines":["resizing cat.png to 640px"]}`},
	{Route: "POST /v1/leases/{lease}/complete", Method: "POST", Path: "/v1/leases/{lease}/complete", Status: 200,
		Body: `{"result":{"url":"s3://bucket/cat-640.png"}}`},
	{Route: "POST /v1/leases/{lease}/complete", Method: "POST", Path: "/v1/leases/{lease}/complete", Status: 200,
		Body: `{"result":{"url":"s3://bucket/cat-640.png"}}`},
	{Route: "POST /v1/leases/{lease}/fail", Method: "POST", Path: "/v1/leases/{lease}/fail", Status: 409,
		Body: `{"error":"image is corrupt","permanent":true}`},
	{Route: "POST /v1/leases/{lease}/heartbeat", Method: "POST", Path: "/v1/leases/{lease}/heartbeat", Status: 200,
		Holds: `"canceled":false`}, // after its own outcome: harmless
	{Route: "POST /v1/leases/{lease}/fail", Method: "POST", Path: "/v1/leases/00112233445566778899aabbccddeeff/fail", Status: 404,
		Body: `{"error":"image is corrupt"}`},
	{Route: "POST /v1/leases/{lease}/complete", Method: "POST", Path: "/v1/leases/not-a-token/complete", Status: 400, Body: `{}`},
	{Route: "POST /v1/leases/{lease}/release", Method: "POST", Path: "/v1/leases/{lease}/release", Status: 409,
		Body: `{"reason":"worker stopping"}`},
	{Route: "POST /v1/leases/{lease}/release", Method: "POST", Path: "/v1/leases/00112233445566778899aabbccddeeff/release", Status: 404},
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 201,
		Body: `{"handler":"resize","payload":{"image":"dog.png","width":640}}`},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-1","handlers":["resize"],"max":8,"wait":"10s"}`, Save: map[string]string{"lease2": "tasks.0.lease"}},
	{Route: "POST /v1/leases/report", Method: "POST", Path: "/v1/leases/report", Status: 200,
		Body: `{"done":[{"lease":"{lease2}","result":{"url":"s3://bucket/dog-640.png"}},{"lease":"{lease}","error":"late"}]}`},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-1","handlers":["resize"],"max":8,"wait":"10ms","done":[{"lease":"{lease2}","result":{"url":"s3://bucket/dog-640.png"}}]}`},
	{Route: "POST /v1/leases/report", Method: "POST", Path: "/v1/leases/report", Status: 400,
		Body: `{"done":[{"lease":"{lease2}","result":1},{"lease":"not-a-token","result":1}]}`},
	// A lease whose task is canceled while its worker runs it: the
	// heartbeat says so, and the lease takes no more lines.
	{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 201,
		Body: `{"handler":"resize","payload":{"image":"owl.png","width":640}}`, Save: map[string]string{"xtask3": "id"}},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-2","handlers":["resize"],"wait":"10s"}`, Save: map[string]string{"lease3": "tasks.0.lease"}},
	{Route: "POST /v1/leases/{lease}/heartbeat", Method: "POST", Path: "/v1/leases/{lease3}/heartbeat", Status: 200, Body: `{}`,
		Holds: `"canceled":false`},
	{Route: "POST /v1/leases/{lease}/heartbeat", Method: "POST", Path: "/v1/leases/{lease3}/heartbeat", Status: 400, Body: `{"extend":"1m"}`},
	{Route: "POST /v1/leases/{lease}/heartbeat", Method: "POST", Path: "/v1/leases/{lease3}/heartbeat", Status: 415, Body: `{}`, Type: "text/plain"},
	{Route: "POST /v1/leases/{lease}/logs", Method: "POST", Path: "/v1/leases/{lease3}/logs", Status: 400,
		Body: `{"lines":[{"text":"resizing","at":"yesterday"}]}`, Holds: `"field":"lines[0].at"`},
	{Route: "POST /v1/tasks/{id}/cancel", Method: "POST", Path: "/v1/tasks/{xtask3}/cancel", Status: 400, Body: `{"reason":"wrong size"}`},
	{Route: "POST /v1/tasks/{id}/cancel", Method: "POST", Path: "/v1/tasks/{xtask3}/cancel", Status: 415, Body: `{}`, Type: "text/plain"},
	{Route: "POST /v1/tasks/{id}/cancel", Method: "POST", Path: "/v1/tasks/{xtask3}/cancel", Status: 200, Holds: `"state":"CANCELED"`},
	{Route: "POST /v1/leases/{lease}/heartbeat", Method: "POST", Path: "/v1/leases/{lease3}/heartbeat", Status: 200, Holds: `"canceled":true`},
	{Route: "POST /v1/leases/{lease}/logs", Method: "POST", Path: "/v1/leases/{lease3}/logs", Status: 409,
		Body: `{"lines":["stopping"]}`, Holds: `"code":"lease_lost"`},
	{Route: "POST /v1/leases/{lease}/release", Method: "POST", Path: "/v1/leases/{lease3}/release", Status: 415, Body: `{}`, Type: "text/plain"},
	// Two processes polling under one worker id: the second instance
	// takes the id over, and the first one's next poll is refused.
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-3","instance":"a1","handlers":["resize"]}`},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 200,
		Body: `{"worker":"resizer-3","instance":"b2","handlers":["resize"]}`},
	{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 409,
		Body: `{"worker":"resizer-3","instance":"a1","handlers":["resize"]}`, Holds: `"field":"instance"`},
	{Route: "GET /v1/workers", Method: "GET", Path: "/v1/workers?handler=resize", Status: 400, Holds: `"field":"handler"`},

	{Route: "GET /v1/peers", Method: "GET", Path: "/v1/peers", Status: 200},
	{Route: "GET /v1/peers", Method: "GET", Path: "/v1/peers?state=alive", Status: 400, Holds: `"field":"state"`},
	{Route: "GET /healthz", Method: "GET", Path: "/healthz?verbose=1", Status: 400, Holds: `"field":"verbose"`},
	{Route: "GET /v1/audit", Method: "GET", Path: "/v1/audit?limit=5", Status: 200},
	{Route: "POST /v1/peers/{id}/forget", Method: "POST", Path: "/v1/peers/12D3KooWAdGkj1x5oVYRbRhs9qhMfvZJjxGKr4BwjJyzVQF3jgGj/forget", Status: 404},
	{Route: "POST /v1/drain", Method: "POST", Path: "/v1/drain", Status: 415, Body: `{}`, Type: "text/plain"}, // the peer stays
	{Route: "POST /v1/drain", Method: "POST", Path: "/v1/drain", Status: 202},                                 // last: the peer leaves
}

// loadSpec loads and validates docs/openapi.yaml (its examples included).
func loadSpec(tb testing.TB) *openapi3.T {
	tb.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../docs/openapi.yaml")
	if err != nil {
		tb.Fatalf("docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(tb.Context()); err != nil {
		tb.Fatalf("docs/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// specKey turns a served pattern ("GET /v1/tasks/{id}", "GET /dash/",
// "/debug/pprof/") or a spec path and method into one comparable form:
// "GET /v1/tasks/{}". A subtree pattern ends in one parameter.
func specKey(method, path string) string {
	if method == "" {
		method = "GET"
	}
	path = strings.TrimSuffix(path, "{$}")
	if path != "/" && strings.HasSuffix(path, "/") {
		path += "{}"
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = "{}"
		}
	}
	return method + " " + strings.Join(segs, "/")
}

func servedKey(pattern string) string {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	return specKey(method, path)
}

// specOps returns the spec's operations by key, with their path.
func specOps(doc *openapi3.T) map[string]string {
	ops := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops[specKey(method, path)] = path
		}
	}
	return ops
}

func TestOpenAPIRoutes(t *testing.T) {
	doc := loadSpec(t)
	p, _, _ := startPeer(t, t.TempDir(), 2)
	mux := p.routes()
	served := map[string]string{}
	for _, pat := range mux.patterns {
		served[servedKey(pat)] = pat
	}
	ops := specOps(doc)
	prose, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	withExample := map[string]bool{}
	for _, ex := range examples {
		withExample[ex.Route] = true
	}
	for _, key := range slices.Sorted(maps.Keys(served)) {
		pat := served[key]
		if _, ok := ops[key]; !ok {
			method, path, _ := strings.Cut(key, " ")
			t.Errorf("%q is served but not in docs/openapi.yaml: add paths.%q.%s (with its parameters, "+
				"request body and every status it answers) to docs/openapi.yaml", pat, path, strings.ToLower(method))
		}
		if path, ok := ops[key]; ok {
			method, _, _ := strings.Cut(key, " ")
			op := doc.Paths.Value(path).GetOperation(method)
			if got, want := op.Extensions["x-needle-scope"], mux.scopes[pat].String(); got != want {
				t.Errorf("docs/openapi.yaml: %s %s has x-needle-scope %v; the route needs %s", method, path, got, want)
			}
		}
		if !withExample[pat] {
			t.Errorf("%q has no example: add an example{Route: %q, ...} to examples in peer/openapi_test.go", pat, pat)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(ops)) {
		method, _, _ := strings.Cut(key, " ")
		if _, ok := served[key]; !ok {
			t.Errorf("docs/openapi.yaml documents %s %s, which the peer does not serve: serve it or remove it", method, ops[key])
		}
		if line := method + " " + ops[key]; !bytes.Contains(prose, []byte(line)) {
			t.Errorf("docs/api.md does not mention %q: add its section to docs/api.md", line)
		}
	}
}

func TestOpenAPIExamples(t *testing.T) {
	doc := loadSpec(t)
	_, c, _ := startPeer(t, t.TempDir(), 2)
	runExamples(t, doc, c.BaseURL, examples)
}

// TestOpenAPILimits holds the spec's answers of a peer's limits: a body
// over --max-body (413) on the routes that read one, a client over --rate
// (429 with Retry-After, on any route), and a token missing, wrong (401
// with WWW-Authenticate) or short of the route's scope (403).
func TestOpenAPILimits(t *testing.T) {
	doc := loadSpec(t)
	const read = "read-token-0123456789abcdef"
	toks, err := api.ParseTokens(read + " name=dash scope=read")
	if err != nil {
		t.Fatal(err)
	}
	_, guarded := startPeerWith(t, Config{Tokens: api.NewTokenSet(toks)})
	bearer := map[string]string{"Authorization": "Bearer " + read}
	runExamples(t, doc, guarded.BaseURL, []example{
		{Route: "GET /v1/stats", Method: "GET", Path: "/v1/stats", Status: 401, Holds: `"field":"Authorization"`},
		{Route: "GET /v1/stats", Method: "GET", Path: "/v1/stats", Status: 401, Header: map[string]string{"Authorization": "Bearer not-this-peers-token-at-all"}},
		{Route: "GET /v1/stats", Method: "GET", Path: "/v1/stats", Status: 200, Header: bearer},
		{Route: "POST /v1/tasks/{id}/cancel", Method: "POST", Path: "/v1/tasks/g1.0/cancel", Status: 403, Header: bearer,
			Holds: `it needs scope submit`},
		{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 403, Header: bearer,
			Body: `{"worker":"w","handlers":["resize"]}`},
		{Route: "GET /healthz", Method: "GET", Path: "/healthz", Status: 200},
	})
	// A peer that has not joined its mesh yet (no peer answers where it
	// joins) serves no partition: 503 with Retry-After, saying why.
	_, alone := startPeerWith(t, Config{Join: []string{"127.0.0.1:1"}})
	runExamples(t, doc, alone.BaseURL, []example{
		{Route: "GET /healthz", Method: "GET", Path: "/healthz", Status: 503},
		{Route: "GET /v1/tasks/{id}", Method: "GET", Path: "/v1/tasks/g1.0", Status: 503, Holds: `the mesh is still forming`},
		{Route: "POST /v1/tasks", Method: "POST", Path: "/v1/tasks", Status: 503, Body: `{"handler":"echo"}`,
			Holds: `the request did nothing: retry it`},
		{Route: "GET /v1/tasks", Method: "GET", Path: "/v1/tasks", Status: 200, Holds: `"missing_partitions":[0,`},
	})
	_, small := startPeerWith(t, Config{Limits: api.Limits{MaxBody: 200}})
	big := `{"lines":["` + strings.Repeat("x", 300) + `"]}`
	lease := "00112233445566778899aabbccddeeff"
	runExamples(t, doc, small.BaseURL, []example{
		{Route: "POST /v1/workers/poll", Method: "POST", Path: "/v1/workers/poll", Status: 413,
			Body: `{"worker":"w","handlers":["resize"],"labels":["` + strings.Repeat("x", 300) + `=1"]}`},
		{Route: "POST /v1/leases/{lease}/logs", Method: "POST", Path: "/v1/leases/" + lease + "/logs", Status: 413, Body: big},
		{Route: "POST /v1/leases/{lease}/complete", Method: "POST", Path: "/v1/leases/" + lease + "/complete", Status: 413,
			Body: `{"result":"` + strings.Repeat("x", 300) + `"}`},
		{Route: "POST /v1/leases/report", Method: "POST", Path: "/v1/leases/report", Status: 413,
			Body: `{"done":[{"lease":"` + lease + `","error":"` + strings.Repeat("x", 300) + `"}]}`},
	})
	// A rate this low takes one request, then refuses every other for
	// ~1,000 s (a burst of one).
	_, slow := startPeerWith(t, Config{RatePerClient: 0.001})
	runExamples(t, doc, slow.BaseURL, []example{
		{Route: "GET /v1/stats", Method: "GET", Path: "/v1/stats", Status: 200},
		{Route: "GET /v1/stats", Method: "GET", Path: "/v1/stats", Status: 429, Holds: `"code":"rate_limited"`},
		{Route: "POST /v1/tasks/{id}/cancel", Method: "POST", Path: "/v1/tasks/g1.0/cancel", Status: 429},
		{Route: "GET /healthz", Method: "GET", Path: "/healthz", Status: 200}, // not counted
	})
}

// runExamples sends each example to the peer at base, in order, and
// validates the request and its answer against the spec.
func runExamples(t *testing.T, doc *openapi3.T, base string, examples []example) {
	t.Helper()
	ops := specOps(doc)
	saved := map[string]string{}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	for i, ex := range examples {
		path := ex.Path
		for name, v := range saved {
			path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
			ex.Body = strings.ReplaceAll(ex.Body, "{"+name+"}", v)
		}
		specPath, ok := ops[servedKey(ex.Route)]
		if !ok {
			t.Errorf("example %d: route %q is not in docs/openapi.yaml", i, ex.Route)
			continue
		}
		status, body := checkExample(t, doc, specPath, ex, base+path, opts)
		if status != ex.Status {
			t.Errorf("example %d: %s %s = %d %s; want %d", i, ex.Method, path, status, body, ex.Status)
		}
		if !bytes.Contains(body, []byte(ex.Holds)) {
			t.Errorf("example %d: %s %s = %d %s; want it to hold %s", i, ex.Method, path, status, body, ex.Holds)
		}
		var fields any
		_ = json.Unmarshal(body, &fields)
		for name, field := range ex.Save {
			if s, ok := jsonPath(fields, field).(string); ok {
				saved[name] = s
			} else {
				t.Fatalf("example %d: %s %s: no string field %q in %s", i, ex.Method, path, field, body)
			}
		}
	}
}

// checkExample validates the request against the spec, sends it, and
// validates the answer; it returns the answer's status and body.
func checkExample(t *testing.T, doc *openapi3.T, specPath string, ex example, target string, opts *openapi3filter.Options) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), ex.Method, target, strings.NewReader(ex.Body))
	if err != nil {
		t.Fatal(err)
	}
	if ex.Body != "" {
		req.Header.Set("Content-Type", cmp.Or(ex.Type, "application/json"))
	}
	for k, v := range ex.Header {
		req.Header.Set(k, v)
	}
	item := doc.Paths.Value(specPath)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: pathParams(specPath, req.URL.Path), Options: opts,
		Route: &routers.Route{Spec: doc, Path: specPath, PathItem: item, Method: ex.Method, Operation: item.GetOperation(ex.Method)}}
	if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil && ex.Status < 400 {
		t.Errorf("%s %s: the request does not match docs/openapi.yaml: %v", ex.Method, target, err)
	}
	req.Body = http.NoBody // the validator read it
	if ex.Body != "" {
		req.Body = io.NopCloser(strings.NewReader(ex.Body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", ex.Method, target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ropts := *opts
	ropts.ExcludeResponseBody = !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
	in.Options = &ropts
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)), Options: &ropts}
	if err := openapi3filter.ValidateResponse(t.Context(), out); err != nil {
		t.Errorf("%s %s: the answer %d %s does not match docs/openapi.yaml: %v", ex.Method, target, resp.StatusCode, body, err)
	}
	return resp.StatusCode, body
}

// pathParams matches a request path against a spec path template.
func pathParams(template, path string) map[string]string {
	params := map[string]string{}
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	for i, s := range ts {
		if i < len(ps) && strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			v, err := url.PathUnescape(ps[i])
			if err != nil {
				v = ps[i]
			}
			params[s[1:len(s)-1]] = v
		}
	}
	return params
}

// jsonPath returns the value at a dotted path of a decoded JSON value
// ("tasks.0.lease"), or nil.
func jsonPath(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// TestOpenAPIEventNames holds the spec's enums of a task event's type and
// an audit entry's action, and api.md's lists of them, against every name
// the code can answer: each non-schedule event type (a task's history) and
// each audited one (GET /v1/audit).
func TestOpenAPIEventNames(t *testing.T) {
	doc := loadSpec(t)
	prose, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	eventType := doc.Components.Schemas["Event"].Value.Properties["type"].Value
	entry := doc.Components.Schemas["AuditList"].Value.Properties["entries"].Value.Items.Value
	action := entry.Properties["action"].Value
	check := func(what string, enum []any, section, name string) {
		t.Helper()
		if !slices.Contains(enum, any(name)) {
			t.Errorf("the code can answer %s %q, which docs/openapi.yaml's enum %v lacks", what, name, enum)
		}
		if !strings.Contains(apiSection(string(prose), section), "`"+name+"`") {
			t.Errorf("docs/api.md's section %q does not name %s `%s`", section, what, name)
		}
	}
	for ty := shard.EventType(1); ty.Valid(); ty++ {
		if !ty.Schedule() && !ty.PeerAction() { // a peer's drain or forget is in no task's history
			check("event type", eventType.Enum, "### GET /v1/tasks/{id}/events", ty.String())
		}
		if ty.Audited() {
			check("audit action", action.Enum, "### GET /v1/audit", ty.String())
		}
	}
}

// apiSection returns the text of api.md from heading to the next heading.
func apiSection(prose, heading string) string {
	_, rest, ok := strings.Cut(prose, heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// TestOpenAPIErrorCodes holds the spec's enum of error codes, and the
// error table of docs/api.md, against every code the API can answer: each
// Code constant of peer/api, with its status (api.StatusOf).
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadSpec(t)
	prose, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas["Error"].Value.Properties["code"].Value.Enum
	pkgs, err := parser.ParseDir(token.NewFileSet(), "api", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{} // code -> its constant
	for _, f := range pkgs["api"].Files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						break
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Code") && lit.Kind == token.STRING {
						code, _ := strconv.Unquote(lit.Value)
						codes[code] = name.Name
					}
				}
			}
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found %d error codes in peer/api: %v", len(codes), codes)
	}
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		if !slices.Contains(enum, any(code)) {
			t.Errorf("api.%s (%q) is not in docs/openapi.yaml's enum of Error.code %v", codes[code], code, enum)
		}
		row := fmt.Sprintf("| %d | `%s` |", api.StatusOf(code), code)
		if !bytes.Contains(prose, []byte(row)) {
			t.Errorf("docs/api.md's error table has no row %q", row)
		}
	}
	for _, v := range enum {
		if _, ok := codes[v.(string)]; !ok {
			t.Errorf("docs/openapi.yaml's enum of Error.code holds %q, which no api.Code constant is", v)
		}
	}
}
