package bench

import (
	"encoding/json"

	"github.com/needle-mesh/needle/internal/jsonscan"
)

// The other half of a W1 client's work is its submissions: encoding/json
// wrote each 1,000-task group's body and read its answer (1,000 names
// and ids in a map), a quarter of the bench client's CPU under W1 on the
// same two cores as the peers. appendGroupSpec writes the body byte for
// byte as json.Marshal does, for the plain specs bench makes, and
// decodeSubmitted reads the answer as decodeGroup reads a group's;
// anything else goes to encoding/json (TestAppendGroupSpecMatchesJSON,
// TestDecodeSubmittedMatchesJSON, FuzzDecodeSubmitted).

// appendGroupSpec appends g as json.Marshal writes it, or reports false
// when g has a string or payload it does not write exactly so (one
// json.Marshal escapes or compacts).
func appendGroupSpec(dst []byte, g *GroupSpec) ([]byte, bool) {
	if !plainString(g.Mode) {
		return dst, false
	}
	dst = append(dst, `{"mode":"`...)
	dst = append(dst, g.Mode...)
	dst = append(dst, `","tasks":`...)
	if g.Tasks == nil {
		return append(dst, "null}"...), true
	}
	dst = append(dst, '[')
	for i := range g.Tasks {
		t := &g.Tasks[i]
		if !plainString(t.Name) || !plainString(t.Handler) || !plainPayload(t.Payload) {
			return dst, false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if t.Name != "" {
			dst = append(dst, `"name":"`...)
			dst = append(dst, t.Name...)
			dst = append(dst, `",`...)
		}
		dst = append(dst, `"handler":"`...)
		dst = append(dst, t.Handler...)
		dst = append(dst, '"')
		if len(t.Payload) > 0 {
			dst = append(dst, `,"payload":`...)
			dst = append(dst, t.Payload...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), true
}

// plainString reports whether json.Marshal writes s between quotes as it
// is: printable ASCII without a quote, a backslash or what it escapes
// for HTML.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// plainPayload reports whether json.Marshal writes raw as it is: valid
// JSON, compact, printable ASCII, nothing escaped for HTML. A space
// inside a string is left to encoding/json too.
func plainPayload(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true // omitted
	}
	for _, c := range raw {
		if c <= 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return json.Valid(raw)
}

// decodeSubmitted reads POST /v1/groups' answer into s as encoding/json
// would, or reports false, leaving it to encoding/json (decodeGroup's
// contract). It keeps nothing of b.
func decodeSubmitted(b []byte, s *Submitted) bool {
	r := jreader{Scanner: jsonscan.Scanner{B: b}}
	var all string // b as one string, which the names and ids share
	ok := r.object(func(key []byte) bool {
		switch string(key) {
		case "group":
			return r.str(&s.Group)
		case "tasks":
			if all == "" {
				all = string(b)
			}
			return r.names(&s.Tasks, all)
		}
		return r.other(key, submittedKeys)
	})
	return ok && r.End()
}

// submittedKeys are the fields decodeSubmitted fills.
var submittedKeys = []string{"group", "tasks"}

// names reads an object of strings into *m, or null. Its keys and values
// are substrings of all, r.B as a string, not copies each.
func (r *jreader) names(m *map[string]string, all string) bool {
	if null, ok := startMap(r, m, len(all)/40); null { // about 40 bytes an entry
		return ok
	}
	return r.object(func(k []byte) bool {
		if r.Peek() != '"' { // a null, which encoding/json stores as ""
			return false
		}
		v, ok := r.span()
		if ok {
			(*m)[r.in(all, k)] = r.in(all, v)
		}
		return ok
	})
}

// in returns v, a span of r.B, as the same bytes of all (r.B as a string).
// A span is r.B[i:j], whose capacity runs to the end of r.B.
func (r *jreader) in(all string, v []byte) string {
	i := cap(r.B) - cap(v)
	return all[i : i+len(v)]
}

// encodeBody is a request's body: in as json.Marshal writes it.
func encodeBody(in any) ([]byte, error) {
	if g, ok := in.(GroupSpec); ok {
		if b, ok := appendGroupSpec(make([]byte, 0, specSize(&g)), &g); ok {
			return b, nil
		}
	}
	return json.Marshal(in)
}

// specSize is about the length of g's body.
func specSize(g *GroupSpec) int {
	n := 32
	for i := range g.Tasks {
		t := &g.Tasks[i]
		n += len(t.Name) + len(t.Handler) + len(t.Payload) + 40
	}
	return n
}
