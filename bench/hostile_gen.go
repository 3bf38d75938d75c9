package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// reqGen is one attacking HTTP client: it sends valid-shaped requests, a
// part of them with hostile values in random fields.
type reqGen struct {
	r     *rand.Rand
	st    *hostileState
	peers []string // member ids, for pin and peer filters
	n     int
}

func (g *reqGen) run(ctx context.Context, c *Client) {
	for ctx.Err() == nil {
		g.n++
		g.once(ctx, c)
	}
}

// once sends one request, chosen by weight.
func (g *reqGen) once(ctx context.Context, c *Client) {
	hostile := g.r.IntN(3) == 0
	switch k := g.r.IntN(100); {
	case k < 25:
		body := g.task()
		if hostile {
			g.mutate(body)
		}
		g.submit(ctx, c, "/v1/tasks", body, hostile)
	case k < 50:
		body := g.group()
		if hostile {
			g.mutate(body)
		}
		g.submit(ctx, c, "/v1/groups", body, hostile)
	case k < 54:
		body := g.schedule()
		if hostile {
			g.mutate(body)
		}
		g.submit(ctx, c, "/v1/schedules", body, hostile)
	case k < 66:
		id := g.id()
		path := g.pick("/v1/tasks/", "/v1/tasks/", "/v1/groups/")
		if strings.HasPrefix(path, "/v1/groups/") {
			id = strings.SplitN(id, ".", 2)[0]
		}
		suffix := g.pick("", "", "/events", "/logs", "/logs?attempt="+g.num())
		g.send(ctx, c, http.MethodGet, path+id+suffix+g.waitParam(), "", nil)
	case k < 78:
		g.send(ctx, c, http.MethodGet, g.pick("/v1/tasks", "/v1/groups", "/v1/stats", "/v1/audit", "/v1/peers", "/v1/schedules")+"?"+g.query(), "", nil)
	case k < 86:
		id := g.id()
		path := "/v1/tasks/" + id
		if g.r.IntN(2) == 0 {
			path = "/v1/groups/" + strings.SplitN(id, ".", 2)[0]
		}
		body := map[string]any{}
		if g.r.IntN(2) == 0 {
			body["key"] = "k" + strconv.Itoa(g.r.IntN(20))
		}
		if hostile {
			g.mutate(body)
		}
		g.send(ctx, c, http.MethodPost, path+g.pick("/cancel", "/retry"), "application/json", mustJSON(body))
	case k < 92:
		id := g.st.someSchedule(g.r)
		if id == "" || hostile {
			id = g.hostileString()
		}
		op := g.pick("", "/pause", "/resume", "/trigger")
		method := http.MethodPost
		if op == "" {
			method = g.pick(http.MethodGet, http.MethodGet, http.MethodDelete)
		}
		var body []byte
		if op == "/trigger" {
			body = mustJSON(map[string]any{"key": "t" + g.num()})
		}
		g.send(ctx, c, method, "/v1/schedules/"+url.PathEscape(id)+op, "application/json", body)
	default:
		g.garbage(ctx, c)
	}
}

// submit posts body and records what the mesh acknowledged.
func (g *reqGen) submit(ctx context.Context, c *Client, path string, body map[string]any, hostile bool) {
	status, resp := g.send(ctx, c, http.MethodPost, path, "application/json", mustJSON(body))
	if status/100 != 2 {
		return
	}
	var a struct {
		ID    string            `json:"id"`
		Group string            `json:"group"`
		Tasks map[string]string `json:"tasks"`
	}
	if json.Unmarshal(resp, &a) != nil {
		return
	}
	switch path {
	case "/v1/tasks":
		g.st.acked(a.Group, []string{a.ID}, hostile)
	case "/v1/groups":
		ids := make([]string, 0, len(a.Tasks))
		for _, id := range a.Tasks {
			ids = append(ids, id)
		}
		g.st.acked(a.Group, ids, hostile)
	case "/v1/schedules":
		g.st.schedule(a.ID)
	}
}

// send sends one request and counts its answer.
func (g *reqGen) send(ctx context.Context, c *Client, method, path, ctype string, body []byte) (int, []byte) {
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, c.base+path, bytes.NewReader(body))
	if err != nil { // a path net/url refuses: not a request the mesh sees
		return 0, nil
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			g.st.count("error", nil)
		}
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	g.st.count(strconv.Itoa(resp.StatusCode), []byte(method+" "+path+": "+string(b)))
	return resp.StatusCode, b
}

// garbage sends what no client should: random bytes, the wrong type,
// unknown routes and methods.
func (g *reqGen) garbage(ctx context.Context, c *Client) {
	b := make([]byte, g.r.IntN(512))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	switch g.r.IntN(5) {
	case 0:
		g.send(ctx, c, http.MethodPost, g.pick("/v1/tasks", "/v1/groups", "/v1/schedules"), "application/json", b)
	case 1:
		g.send(ctx, c, http.MethodPost, "/v1/tasks", "text/plain", mustJSON(g.task()))
	case 2:
		g.send(ctx, c, g.pick(http.MethodPut, http.MethodPatch, http.MethodDelete, "BREW"), g.pick("/v1/tasks", "/v1/groups/x", "/healthz", "/v1/peers"), "application/json", nil)
	case 3:
		g.send(ctx, c, http.MethodGet, "/"+url.PathEscape(g.hostileString())+"/"+url.PathEscape(g.hostileString()), "", nil)
	default: // a valid body truncated
		j := mustJSON(g.group())
		g.send(ctx, c, http.MethodPost, "/v1/groups", "application/json", j[:g.r.IntN(len(j))])
	}
}

func (g *reqGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

func (g *reqGen) num() string {
	return g.pick("0", "1", "2", "-1", "999999999999", "x", "")
}

func (g *reqGen) waitParam() string {
	if g.r.IntN(4) != 0 {
		return ""
	}
	return "?wait=" + g.pick("10ms", "100ms", "0s", "-1s", "1y", "abc", "300s")
}

// id returns an acknowledged task id, a hostile one sometimes.
func (g *reqGen) id() string {
	if id := g.st.someTask(g.r); id != "" && g.r.IntN(4) != 0 {
		return id
	}
	return url.PathEscape(g.hostileString())
}

// query returns list parameters, valid and not.
func (g *reqGen) query() string {
	q := url.Values{}
	keys := []string{"state", "handler", "mode", "schedule", "peer", "label", "created_after", "created_before", "finished_after", "finished_before", "worker_deaths", "q", "limit", "cursor", "bogus"}
	for range g.r.IntN(4) {
		k := keys[g.r.IntN(len(keys))]
		var v string
		switch k {
		case "state":
			v = g.pick("failed", "ready", "running", "succeeded", "canceled", "pending", "FAILED", "nope")
		case "limit":
			v = g.pick("1", "50", "1000", "1001", "0", "-3", "x")
		case "worker_deaths":
			v = g.pick("1", "2", "66", "67", "0", "-1", "x")
		case "created_after", "created_before", "finished_after", "finished_before":
			v = g.pick(time.Now().Add(-time.Hour).Format(time.RFC3339), "2026-13-45T00:00:00Z", "yesterday", "1h")
		case "peer":
			v = g.peers[g.r.IntN(len(g.peers))]
		case "handler":
			v = g.pick("echo", "sleep", "fail", "")
		case "mode":
			v = g.pick("dag", "parallel", "pipeline", "broadcast", "staged", "x")
		default:
			v = g.hostileString()
		}
		q.Add(k, v)
	}
	return q.Encode()
}

// task returns a valid task body that finishes in well under a second.
func (g *reqGen) task() map[string]any {
	t := map[string]any{}
	switch g.r.IntN(4) {
	case 0, 1:
		t["handler"] = "echo"
		t["payload"] = map[string]any{"n": g.r.IntN(1000)}
	case 2:
		t["handler"] = "sleep"
		t["payload"] = map[string]any{"ms": g.r.IntN(100)}
	default:
		t["handler"] = "fail"
		t["payload"] = map[string]any{"permanent": g.r.IntN(2) == 0, "message": "hostile"}
	}
	if g.r.IntN(3) == 0 {
		t["retry"] = map[string]any{"max_attempts": 1 + g.r.IntN(3), "backoff": "10ms", "max_backoff": "50ms"}
	}
	if g.r.IntN(4) == 0 {
		t["timeout"] = "5s"
	}
	if g.r.IntN(4) == 0 {
		t["priority"] = g.r.IntN(10) - 5
	}
	if g.r.IntN(8) == 0 {
		t["delay"] = "200ms"
	}
	if g.r.IntN(10) == 0 {
		t["key"] = "k" + strconv.Itoa(g.r.IntN(50))
	}
	return t
}

// group returns a valid group body of a random mode.
func (g *reqGen) group() map[string]any {
	n := 1 + g.r.IntN(12)
	tasks := make([]any, n)
	for i := range tasks {
		t := g.task()
		delete(t, "key")
		tasks[i] = t
	}
	b := map[string]any{}
	switch g.r.IntN(5) {
	case 0:
		b["mode"] = "parallel"
		b["tasks"] = tasks
	case 1: // a DAG: each task depends on some earlier ones
		for i, t := range tasks {
			m := t.(map[string]any)
			m["name"] = "t" + strconv.Itoa(i)
			if i > 0 {
				m["deps"] = []string{"t" + strconv.Itoa(g.r.IntN(i))}
			}
		}
		b["mode"] = "dag"
		b["tasks"] = tasks
	case 2:
		b["mode"] = "pipeline"
		b["stages"] = []any{
			map[string]any{"name": "a", "handler": "echo", "concurrency": 1 + g.r.IntN(4)},
			map[string]any{"name": "b", "handler": g.pick("echo", "sleep"), "concurrency": g.r.IntN(3)},
		}
		items := make([]any, 1+g.r.IntN(20))
		for i := range items {
			items[i] = map[string]any{"ms": g.r.IntN(20)}
		}
		b["items"] = items
	case 3:
		b["mode"] = "broadcast"
		b["tasks"] = tasks[:1]
	default:
		b["mode"] = "staged"
		b["stages"] = []any{tasks[:n/2+1], tasks[n/2+1:]}
	}
	if g.r.IntN(10) == 0 {
		b["key"] = "g" + strconv.Itoa(g.r.IntN(50))
	}
	return b
}

// schedule returns a valid schedule body firing a small group.
func (g *reqGen) schedule() map[string]any {
	s := map[string]any{"name": "h" + strconv.Itoa(g.r.IntN(1000)), "group": map[string]any{"mode": "parallel", "tasks": []any{map[string]any{"handler": "echo"}}}}
	if g.r.IntN(2) == 0 {
		s["every"] = g.pick("1s", "2s", "5s")
	} else {
		s["cron"] = g.pick("* * * * *", "*/2 * * * * *", "@hourly", "0 2 * * *")
		s["timezone"] = g.pick("UTC", "Europe/Paris", "America/New_York")
	}
	s["overlap"] = g.pick("skip", "allow")
	return s
}

// The fields a mutation may hit, at the top of a body or in a task, stage
// or retry object.
var hostileFields = []string{
	"handler", "payload", "priority", "timeout", "retry", "max_attempts", "backoff", "max_backoff",
	"delay", "require", "pin", "key", "trace", "notify", "name", "deps", "mode", "tasks", "stages",
	"items", "concurrency", "every", "cron", "timezone", "overlap", "misfire", "paused", "group", "bogus",
}

// mutate replaces, adds or deletes one to three fields somewhere in body.
func (g *reqGen) mutate(body map[string]any) {
	for range 1 + g.r.IntN(3) {
		obj := g.someObject(body, 0)
		f := hostileFields[g.r.IntN(len(hostileFields))]
		if g.r.IntN(5) == 0 {
			delete(obj, f)
			continue
		}
		obj[f] = g.hostileValue()
	}
}

// someObject returns body or an object nested in it.
func (g *reqGen) someObject(m map[string]any, depth int) map[string]any {
	if depth > 3 || g.r.IntN(3) == 0 {
		return m
	}
	var inner []map[string]any
	for _, v := range m {
		switch v := v.(type) {
		case map[string]any:
			inner = append(inner, v)
		case []any:
			for _, e := range v {
				switch e := e.(type) {
				case map[string]any:
					inner = append(inner, e)
				case []any:
					for _, x := range e {
						if x, ok := x.(map[string]any); ok {
							inner = append(inner, x)
						}
					}
				}
			}
		}
	}
	if len(inner) == 0 {
		return m
	}
	return g.someObject(inner[g.r.IntN(len(inner))], depth+1)
}

// hostileValue returns a value a careless decoder or state machine might
// choke on.
func (g *reqGen) hostileValue() any {
	switch g.r.IntN(14) {
	case 0:
		return g.pick("2147483648", "-1", "9223372036854775807", "1e308", "-0", "0.5")
	case 1:
		return []int64{2147483648, -2147483649, 1 << 62, -1, 0}[g.r.IntN(5)]
	case 2:
		return []float64{1e308, -1e308, 0.5, 3.999999}[g.r.IntN(4)]
	case 3:
		return g.pick("2562047h", "2562048h", "-5s", "0s", "1ns", "9999999999h", "366d", "8784h1ns", "1e9h", "P1D")
	case 4:
		return strings.Repeat(g.pick("a", "é", "\x00", "/", "."), g.r.IntN(70000))
	case 5:
		return nil
	case 6:
		return map[string]any{}
	case 7:
		return []any{}
	case 8:
		return json.RawMessage(strings.Repeat("[", 200) + strings.Repeat("]", 200))
	case 9: // many selectors or deps
		l := make([]string, g.r.IntN(3000))
		for i := range l {
			l[i] = fmt.Sprintf("k%d=v", i)
		}
		return l
	case 10:
		return g.r.IntN(2) == 0
	case 11:
		return g.hostileString()
	case 12:
		return g.pick("http://169.254.169.254/latest", "file:///etc/passwd", "http://127.0.0.1:1/x", "ftp://x")
	default: // a large array of tasks
		n := g.r.IntN(3000)
		ts := make([]any, n)
		for i := range ts {
			ts[i] = map[string]any{"handler": "echo"}
		}
		return ts
	}
}

func (g *reqGen) hostileString() string {
	return g.pick("", " ", "..", "../..", "x.y.z", "%00", "a\x00b", "0", "-1", "🙂", "g.99999999999999999999",
		"/etc/passwd", strings.Repeat("z", 5000), "'; DROP TABLE", "a=b=c", "*", "?")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps, slices and scalars built above
	}
	return b
}
