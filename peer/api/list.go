package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// List queries: GET /v1/tasks and GET /v1/groups.
//
// A cursor is the key of the last item of a page (creation time, group,
// task index) plus a digest of the query's filters, and a checksum over
// both. A cursor that was altered, truncated, or taken from a query with
// other filters is refused (400, field "cursor"). The checksum makes
// tampering evident, not impossible: a forged cursor can only name a
// position in the same listing, which reveals nothing the listing would
// not.

// Limits of a list query.
const (
	DefaultListLimit = 50
	MaxListLimit     = shard.MaxListLimit
)

// ListQuery is a parsed list request.
type ListQuery struct {
	Filter shard.Filter
	// digest names the filters (not the limit nor the cursor), so that a
	// cursor from another query is refused.
	digest [8]byte
}

// ParseListQuery parses the query of a list request; groups selects the
// group states (RUNNING SUCCEEDED FAILED CANCELED) for "state" instead of
// the task states. Every error is a *FieldError naming the parameter.
func ParseListQuery(q url.Values, groups bool) (ListQuery, error) {
	var lq ListQuery
	f := &lq.Filter
	for _, k := range slices.Sorted(mapKeys(q)) {
		if k == "" {
			return lq, fieldErr("query", "a parameter without a name")
		}
		if !slices.Contains(listParamNames, k) {
			return lq, fieldErr(k, "unknown parameter (want one of state, handler, mode, schedule, peer, label, created_after, created_before, finished_after, finished_before, worker_deaths, q, limit, cursor)")
		}
		if k != "state" && len(q[k]) > 1 {
			return lq, fieldErr(k, "given %d times; want once", len(q[k]))
		}
	}
	if err := parseStates(q["state"], groups, f); err != nil {
		return lq, err
	}
	f.Handler, f.Peer, f.Label, f.Q = q.Get("handler"), q.Get("peer"), q.Get("label"), q.Get("q")
	f.Schedule = shard.ScheduleID(q.Get("schedule"))
	if f.Label != "" && !strings.Contains(f.Label, "=") {
		return lq, fieldErr("label", "%q: want key=value", f.Label)
	}
	if m := q.Get("mode"); m != "" {
		mode, ok := shard.ParseMode(m)
		if !ok {
			return lq, fieldErr("mode", "unknown mode %q (want single, dag, parallel, pipeline, staged, broadcast)", m)
		}
		f.Mode = mode
	}
	for _, tf := range []struct {
		name string
		into *time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}, {"finished_after", &f.FinishedAfter}, {"finished_before", &f.FinishedBefore}} {
		if err := parseTime(q.Get(tf.name), tf.name, tf.into); err != nil {
			return lq, err
		}
	}
	if v := q.Get("worker_deaths"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > shard.MaxDeaths {
			return lq, fieldErr("worker_deaths", "%q: want an integer in 1..%d (at least this many worker deaths)", v, shard.MaxDeaths)
		}
		f.WorkerDeaths = n
	}
	if err := parseLimit(q.Get("limit"), f); err != nil {
		return lq, err
	}
	lq.digest = filterDigest(q, groups)
	if c := q.Get("cursor"); c != "" {
		k, err := decodeCursor(c, lq.digest)
		if err != nil {
			return lq, err
		}
		f.After = &k
	}
	return lq, nil
}

func mapKeys(q url.Values) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	}
}

func parseStates(vals []string, groups bool, f *shard.Filter) error {
	for _, v := range vals {
		for _, sent := range strings.Split(v, ",") {
			// Matched in any case; an error echoes what was sent.
			sent = strings.TrimSpace(sent)
			name := strings.ToUpper(sent)
			if groups {
				gs, ok := parseGroupState(name)
				if !ok {
					return fieldErr("state", "unknown group state %q (want RUNNING, SUCCEEDED, FAILED, CANCELED)", sent)
				}
				f.GroupStates = append(f.GroupStates, gs)
				continue
			}
			st, ok := shard.ParseState(name)
			if !ok {
				return fieldErr("state", "unknown state %q (want PENDING, READY, RUNNING, WAITING, SUCCEEDED, FAILED, CANCELED)", sent)
			}
			f.States = append(f.States, st)
		}
	}
	return nil
}

func parseGroupState(name string) (shard.GroupState, bool) {
	for gs := shard.GroupRunning; gs <= shard.GroupCanceled; gs++ {
		if gs.String() == name {
			return gs, true
		}
	}
	return 0, false
}

func parseTime(v, name string, into *time.Time) error {
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return fieldErr(name, "%q: want an RFC 3339 time", v)
	}
	*into = t
	return nil
}

func parseLimit(v string, f *shard.Filter) error {
	f.Limit = DefaultListLimit
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxListLimit {
		return fieldErr("limit", "%q: want an integer in 1..%d", v, MaxListLimit)
	}
	f.Limit = n
	return nil
}

// filterDigest hashes the filter parameters in a canonical order.
func filterDigest(q url.Values, groups bool) [8]byte {
	h := sha256.New()
	h.Write([]byte("needle list v1"))
	if groups {
		h.Write([]byte{'g'})
	}
	for _, k := range slices.Sorted(mapKeys(q)) {
		if k == "cursor" || k == "limit" {
			continue
		}
		for _, v := range q[k] {
			h.Write([]byte{0})
			h.Write([]byte(k))
			h.Write([]byte{1})
			h.Write([]byte(v))
		}
	}
	var d [8]byte
	copy(d[:], h.Sum(nil))
	return d
}

const cursorVersion = 1

// Cursor returns the cursor that resumes lq after the item with key k.
func (lq *ListQuery) Cursor(k shard.ListKey) string {
	b := []byte{cursorVersion}
	b = append(b, lq.digest[:]...)
	b = binary.AppendVarint(b, k.Created.UnixNano())
	b = binary.AppendUvarint(b, uint64(k.Task))
	b = append(b, k.Group...)
	sum := sha256.Sum256(append([]byte("needle cursor"), b...))
	return base64.RawURLEncoding.EncodeToString(append(b, sum[:8]...))
}

func decodeCursor(c string, digest [8]byte) (shard.ListKey, error) {
	bad := fieldErr("cursor", "not a cursor of this query (altered, truncated, or from a query with other filters)")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 1+8+2+8 {
		return shard.ListKey{}, bad
	}
	body, sum := b[:len(b)-8], b[len(b)-8:]
	want := sha256.Sum256(append([]byte("needle cursor"), body...))
	if string(want[:8]) != string(sum) || body[0] != cursorVersion || string(body[1:9]) != string(digest[:]) {
		return shard.ListKey{}, bad
	}
	p := body[9:]
	ns, n := binary.Varint(p)
	if n <= 0 {
		return shard.ListKey{}, bad
	}
	p = p[n:]
	task, n := binary.Uvarint(p)
	if n <= 0 || task > 1<<31 {
		return shard.ListKey{}, bad
	}
	return shard.ListKey{Created: time.Unix(0, ns).UTC(), Task: int(task), Group: shard.GroupID(p[n:])}, nil
}

// TaskList is the body of GET /v1/tasks.
type TaskList struct {
	Tasks []Task `json:"tasks"`
	// Cursor resumes the listing after the last task: set when the page
	// is full (the next may be empty: the merge of the partitions' pages
	// does not know whether more follow), "" when it holds fewer.
	Cursor string `json:"cursor,omitempty"`
	// MissingPartitions lists the partitions no peer answered for (their
	// owners are unreachable or being elected): their tasks are absent.
	MissingPartitions []int `json:"missing_partitions,omitempty"`
}

// GroupList is the body of GET /v1/groups.
type GroupList struct {
	Groups            []Group `json:"groups"`
	Cursor            string  `json:"cursor,omitempty"`
	MissingPartitions []int   `json:"missing_partitions,omitempty"`
}

// Lister is what a Backend implements to serve the mesh-wide lists and
// counts (GET /v1/tasks, GET /v1/groups, GET /v1/stats).
type Lister interface {
	// ListTasks returns up to f.Limit tasks matching f, newest first.
	ListTasks(ctx context.Context, f *shard.Filter) (TaskPage, error)
	// ListGroups returns up to f.Limit group summaries matching f.
	ListGroups(ctx context.Context, f *shard.Filter) (GroupPage, error)
	// Stats counts the tasks per handler and state.
	Stats(ctx context.Context) (StatsPage, error)
}

// TaskPage is one page of tasks with each one's list key.
type TaskPage struct {
	Tasks   []shard.TaskView
	Keys    []shard.ListKey
	Missing []int // partitions nobody answered for
}

// GroupPage is one page of groups with each one's list key.
type GroupPage struct {
	Groups  []shard.GroupView
	Keys    []shard.ListKey
	Missing []int
}

// StatsPage is the mesh's task counts per handler.
type StatsPage struct {
	Handlers map[string]*shard.HandlerStats
	Now      time.Time // the answering peer's clock, for ages
	Missing  []int
	// Waiting says, per handler with READY tasks that nothing may run
	// (an external handler no live worker serves), why.
	Waiting map[string]string
}

func (s *server) listRoutes(l Lister) []route {
	return []route{
		{"GET", "/v1/tasks", ScopeRead, func(w http.ResponseWriter, r *http.Request) { s.listTasks(w, r, l) }},
		{"GET", "/v1/groups", ScopeRead, func(w http.ResponseWriter, r *http.Request) { s.listGroups(w, r, l) }},
		{"GET", "/v1/stats", ScopeRead, func(w http.ResponseWriter, r *http.Request) { s.stats(w, r, l) }},
	}
}

func (s *server) listTasks(w http.ResponseWriter, r *http.Request, l Lister) {
	lq, err := ParseListQuery(r.URL.Query(), false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := l.ListTasks(r.Context(), &lq.Filter)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := TaskList{Tasks: make([]Task, len(page.Tasks)), MissingPartitions: page.Missing}
	for i, v := range page.Tasks {
		out.Tasks[i] = NewTask(v)
	}
	if len(page.Keys) == lq.Filter.Limit {
		out.Cursor = lq.Cursor(page.Keys[len(page.Keys)-1])
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) listGroups(w http.ResponseWriter, r *http.Request, l Lister) {
	lq, err := ParseListQuery(r.URL.Query(), true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := l.ListGroups(r.Context(), &lq.Filter)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := GroupList{Groups: make([]Group, len(page.Groups)), MissingPartitions: page.Missing}
	for i, v := range page.Groups {
		out.Groups[i] = NewGroup(v, false)
	}
	if len(page.Keys) == lq.Filter.Limit {
		out.Cursor = lq.Cursor(page.Keys[len(page.Keys)-1])
	}
	writeJSON(w, http.StatusOK, out)
}

// HandlerCounts is one handler's line of GET /v1/stats.
type HandlerCounts struct {
	Handler string         `json:"handler"`
	Counts  map[string]int `json:"counts"` // state name -> tasks; zero counts omitted
	// OldestReadyAge is how long the longest-waiting READY task has
	// waited, in seconds (0 when none is READY).
	OldestReadyAge float64 `json:"oldest_ready_age_seconds"`
	// Waiting, when its READY tasks can run nowhere whatever their labels
	// (an external handler no live worker serves), says why.
	Waiting string `json:"waiting,omitempty"`
}

// Stats is the body of GET /v1/stats.
type Stats struct {
	Handlers          []HandlerCounts `json:"handlers"` // by handler name
	Totals            map[string]int  `json:"totals"`   // state name -> tasks, all handlers
	MissingPartitions []int           `json:"missing_partitions,omitempty"`
}

func (s *server) stats(w http.ResponseWriter, r *http.Request, l Lister) {
	if ks := slices.Sorted(mapKeys(r.URL.Query())); len(ks) > 0 {
		s.fail(w, r, fieldErr(ks[0], "unknown parameter (GET /v1/stats takes none)"))
		return
	}
	page, err := l.Stats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewStats(page))
}

// NewStats converts a StatsPage to its JSON form.
func NewStats(page StatsPage) Stats {
	out := Stats{Handlers: []HandlerCounts{}, Totals: map[string]int{}, MissingPartitions: page.Missing}
	for _, h := range slices.Sorted(maps.Keys(page.Handlers)) {
		hs := page.Handlers[h]
		hc := HandlerCounts{Handler: h, Counts: map[string]int{}, Waiting: page.Waiting[h]}
		for st, n := range hs.Counts {
			if n > 0 {
				hc.Counts[shard.State(st).String()] = n
				out.Totals[shard.State(st).String()] += n
			}
		}
		if !hs.OldestReady.IsZero() {
			hc.OldestReadyAge = max(0, page.Now.Sub(hs.OldestReady).Seconds())
		}
		out.Handlers = append(out.Handlers, hc)
	}
	return out
}
