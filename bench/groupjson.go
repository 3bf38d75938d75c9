package bench

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/needle-mesh/needle/internal/jsonscan"
)

// A group's answer is the largest thing bench reads: W1's 1,000-task
// groups are 410 KB of JSON each, and encoding/json took about 10 us a
// task to decode them, a third of all the CPU of a one-peer W1 run on
// the same two cores as the peer. decodeGroup reads the answer in one
// pass into the same Group encoding/json would make, or reports false
// for anything it does not read exactly as encoding/json would (an
// escaped string, a key that differs only in case, a number that is not
// a plain integer, malformed JSON), and Client.do then decodes it with
// encoding/json (TestDecodeGroupMatchesJSON, FuzzDecodeGroup).
//
// Like encoding/json, it keeps nothing of b: the tasks' results are
// copied into one buffer of their own (keep).
func decodeGroup(b []byte, g *Group) bool {
	r := jreader{Scanner: jsonscan.Scanner{B: b}}
	tasks := false
	ok := r.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return r.str(&g.ID)
		case "mode":
			return r.str(&g.Mode)
		case "state":
			return r.str(&g.State)
		case "counts":
			return r.counts(&g.Counts)
		case "tasks":
			if tasks {
				return false // encoding/json decodes a second list over the first
			}
			tasks = true
			return r.tasks(&g.Tasks)
		}
		return r.other(key, groupKeys)
	})
	return ok && r.End()
}

// groupKeys and taskKeys are the fields decodeGroup fills: a key equal
// to one of them but for case is one encoding/json would fill too.
var (
	groupKeys = []string{"id", "mode", "state", "counts", "tasks"}
	taskKeys  = []string{"id", "group", "handler", "state", "attempt", "round", "peer", "result", "error", "started_at", "finished_at"}
)

// jreader reads a group's answer; each method reports false for input it
// does not take, leaving I anywhere.
type jreader struct {
	jsonscan.Scanner
	last [4]string // strings of the previous task, shared by the next
	kept []byte    // copies of results (keep)
}

// keep returns a copy of v, from a buffer the group's results share.
func (r *jreader) keep(v []byte) json.RawMessage {
	if cap(r.kept)-len(r.kept) < len(v) {
		r.kept = make([]byte, 0, max(len(v), 32<<10))
	}
	r.kept = append(r.kept, v...)
	return r.kept[len(r.kept)-len(v) : len(r.kept) : len(r.kept)]
}

// object reads an object, calling field for each key with r at its value.
func (r *jreader) object(field func(key []byte) bool) bool {
	if !r.Next('{') {
		return false
	}
	if r.Next('}') {
		return true
	}
	for {
		k, ok := r.span()
		if !ok || !r.Next(':') || !field(k) {
			return false
		}
		if r.Next('}') {
			return true
		}
		if !r.Next(',') {
			return false
		}
	}
}

// span reads a string without escapes and returns its bytes in b.
func (r *jreader) span() ([]byte, bool) {
	if !r.Next('"') {
		return nil, false
	}
	start, ascii := r.I, true
	for ; r.I < len(r.B); r.I++ {
		switch c := r.B[r.I]; {
		case c == '"':
			s := r.B[start:r.I]
			r.I++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string or null (which leaves *s as it is).
func (r *jreader) str(s *string) bool {
	if r.Peek() == 'n' {
		return r.word("null")
	}
	v, ok := r.span()
	if ok {
		*s = string(v)
	}
	return ok
}

// shared reads a string like str, reusing the previous task's string at
// slot k when it is the same (a group's tasks share their group, handler,
// state and peer).
func (r *jreader) shared(k int, s *string) bool {
	if r.Peek() == 'n' {
		return r.word("null")
	}
	v, ok := r.span()
	if !ok {
		return false
	}
	if string(v) != r.last[k] {
		r.last[k] = string(v)
	}
	*s = r.last[k]
	return true
}

func (r *jreader) word(w string) bool {
	if len(r.B)-r.I < len(w) || string(r.B[r.I:r.I+len(w)]) != w {
		return false
	}
	r.I += len(w)
	return true
}

// integer reads a plain integer or null (which leaves *n as it is).
func (r *jreader) integer(n *int) bool {
	if r.Peek() == 'n' {
		return r.word("null")
	}
	start := r.I
	if r.I < len(r.B) && r.B[r.I] == '-' {
		r.I++
	}
	for r.I < len(r.B) && r.B[r.I] >= '0' && r.B[r.I] <= '9' {
		r.I++
	}
	v, err := strconv.Atoi(string(r.B[start:r.I]))
	if err != nil || r.I-start > 1 && r.B[start] == '0' || r.I < len(r.B) && (r.B[r.I] == '.' || r.B[r.I] == 'e' || r.B[r.I] == 'E') {
		return false
	}
	*n = v
	return true
}

func (r *jreader) counts(m *map[string]int) bool {
	if null, ok := startMap(r, m, 2); null {
		return ok
	}
	return r.object(func(k []byte) bool {
		n := 0
		if !r.integer(&n) {
			return false
		}
		(*m)[string(k)] = n
		return true
	})
}

// startMap starts reading an object into *m as encoding/json does: a null
// sets *m to nil (null, and ok when it was one), and a nil *m is made for
// size entries.
func startMap[V any](r *jreader, m *map[string]V, size int) (null, ok bool) {
	if r.Peek() == 'n' {
		if !r.word("null") {
			return true, false
		}
		*m = nil
		return true, true
	}
	if *m == nil {
		*m = make(map[string]V, size)
	}
	return false, true
}

func (r *jreader) tasks(ts *[]Task) bool {
	if r.Peek() == 'n' {
		if !r.word("null") {
			return false
		}
		*ts = nil
		return true
	}
	// A task's JSON is about 400 bytes: size the slice once.
	out := make([]Task, 0, min(len(r.B)-r.I, 1<<26)/256+1)
	if !r.Array(func() bool {
		var t Task
		if !r.task(&t) {
			return false
		}
		out = append(out, t)
		return true
	}) {
		return false
	}
	*ts = out
	return true
}

func (r *jreader) task(t *Task) bool {
	return r.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return r.str(&t.ID)
		case "group":
			return r.shared(0, &t.Group)
		case "handler":
			return r.shared(1, &t.Handler)
		case "state":
			return r.shared(2, &t.State)
		case "peer":
			return r.shared(3, &t.Peer)
		case "attempt":
			return r.integer(&t.Attempt)
		case "round":
			return r.integer(&t.Round)
		case "result":
			v, ok := r.value()
			t.Result = r.keep(v)
			return ok
		case "error":
			v, ok := r.value()
			if !ok {
				return false
			}
			if string(v) == "null" {
				t.Error = nil
				return true
			}
			return json.Unmarshal(v, &t.Error) == nil
		case "started_at":
			return r.time(&t.StartedAt)
		case "finished_at":
			return r.time(&t.FinishedAt)
		}
		return r.other(key, taskKeys)
	})
}

// time reads an RFC 3339 string, "" or null (the zero time), as Time's
// UnmarshalJSON does.
func (r *jreader) time(t *Time) bool {
	if r.Peek() == 'n' {
		if !r.word("null") {
			return false
		}
		t.Time = time.Time{}
		return true
	}
	s, ok := r.span()
	if !ok {
		return false
	}
	if len(s) == 0 {
		t.Time = time.Time{}
		return true
	}
	// time.Time's UnmarshalJSON is stricter than time.Parse about a few
	// forms: this reads the one the API writes (UTC, up to nanoseconds)
	// and leaves anything else to it.
	if !utcStamp(s) {
		return false
	}
	v, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil {
		return false
	}
	t.Time = v
	return true
}

// utcStamp reports whether s is 2006-01-02T15:04:05[.999999999]Z.
func utcStamp(s []byte) bool {
	const form = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(form)+1 || s[len(s)-1] != 'Z' {
		return false
	}
	for i := range len(form) {
		if c := s[i]; form[i] == 'd' && (c < '0' || c > '9') || form[i] != 'd' && c != form[i] {
			return false
		}
	}
	frac := s[len(form) : len(s)-1]
	if len(frac) == 0 {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
		return false
	}
	for _, c := range frac[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// other skips the value of a key decodeGroup does not fill, unless
// encoding/json would fill a field with it (a key equal to one of known
// but for case).
func (r *jreader) other(key []byte, known []string) bool {
	for _, k := range known {
		if bytes.EqualFold([]byte(k), key) {
			return false
		}
	}
	_, ok := r.value()
	return ok
}

// value reads any JSON value and returns its bytes.
func (r *jreader) value() ([]byte, bool) {
	r.Space()
	start := r.I
	if !r.skip(0) {
		return nil, false
	}
	return r.B[start:r.I], true
}

// maxDepth bounds the nesting skip follows (encoding/json's is 10,000).
const maxDepth = 1000

// skip reads one JSON value, checking it as encoding/json would.
func (r *jreader) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch r.Peek() {
	case '{':
		r.I++
		if r.Next('}') {
			return true
		}
		for {
			if _, ok := r.span(); !ok || !r.Next(':') || !r.skip(depth+1) {
				return false
			}
			if r.Next('}') {
				return true
			}
			if !r.Next(',') {
				return false
			}
		}
	case '[':
		return r.Array(func() bool { return r.skip(depth + 1) })
	case '"':
		return r.quoted()
	case 't':
		return r.word("true")
	case 'f':
		return r.word("false")
	case 'n':
		return r.word("null")
	}
	return r.number()
}

// quoted reads a string, escapes and all, checking it as encoding/json
// would (which takes any bytes but control characters in a string).
func (r *jreader) quoted() bool {
	r.I++ // the opening quote
	for r.I < len(r.B) {
		c := r.B[r.I]
		r.I++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if r.I >= len(r.B) {
				return false
			}
			e := r.B[r.I]
			r.I++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(r.B)-r.I < 4 {
					return false
				}
				for _, h := range r.B[r.I : r.I+4] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				r.I += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads a JSON number.
func (r *jreader) number() bool {
	b, i := r.B, r.I
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	r.I = i
	return true
}
