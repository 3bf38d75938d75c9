package api

import (
	"encoding/json"
	"strconv"

	"github.com/needle-mesh/needle/internal/jsonscan"
)

// A group's body is what a busy client sends most, and encoding/json
// (reflection, a scanner that validates every byte, then the decode)
// took a seventh of a peer's CPU under W1. fastGroup reads the bodies
// clients usually send, by hand, into the same value decodeStrict makes,
// and gives up on anything else: escapes in a string, a byte outside
// ASCII, a key not spelled as the field's tag (encoding/json also takes
// other cases), a key twice, null, a number that is not a plain int32,
// stages or items. What it gives up on is decoded by decodeStrict, whose
// errors name the field; fastGroup reports none of its own.
// TestFastGroupMatchesDecodeStrict and FuzzFastGroupMatchesDecodeStrict
// hold the two to the same values.

// fastGroup decodes data into g as decodeStrict(data, g, "") would, and
// reports whether it did; when it gives up, g is left zero, for
// decodeStrict to decode into. The tasks are parsed into room's array when
// it has the room.
func fastGroup(data []byte, g *rawGroupOf[rawGroupTask], room []rawGroupTask) (ok bool) {
	defer func() {
		if !ok {
			*g = rawGroupOf[rawGroupTask]{}
		}
	}()
	p := parser{Scanner: jsonscan.Scanner{B: data}}
	if !p.object(func(key string) bool {
		switch key {
		case "mode":
			return p.str(&g.Mode)
		case "key":
			g.Key = new(string)
			return p.str(g.Key)
		case "trace":
			return p.str(&g.Trace)
		case "notify":
			return p.str(&g.Notify)
		case "to":
			return p.str(&g.To)
		case "concurrency":
			var c int32
			if !p.int32(&c) {
				return false
			}
			g.Concurrency = int(c)
			return true
		case "tasks":
			g.Tasks = room[:0:cap(room)]
			if g.Tasks == nil {
				g.Tasks = []rawGroupTask{}
			}
			return p.Array(func() bool {
				g.Tasks = append(g.Tasks, rawGroupTask{})
				return p.task(&g.Tasks[len(g.Tasks)-1])
			})
		}
		return false
	}) {
		return false
	}
	return p.End()
}

// parser reads JSON from b at i; each method reports false for what it
// does not take (and the caller gives up).
type parser struct {
	jsonscan.Scanner
	// last holds the last string read for a field that repeats from task
	// to task (handler, timeout, delay): the same bytes are not copied
	// again.
	last [3]string
}

func (p *parser) task(t *rawGroupTask) bool {
	return p.object(func(key string) bool {
		switch key {
		case "name":
			return p.str(&t.Name)
		case "handler":
			return p.again(&t.Handler, 0)
		case "payload":
			return p.raw(&t.Payload)
		case "priority":
			return p.int32(&t.Priority)
		case "timeout":
			return p.again(&t.Timeout, 1)
		case "retry":
			return p.raw(&t.Retry)
		case "delay":
			return p.again(&t.Delay, 2)
		case "deps":
			return p.strs(&t.Deps)
		case "require":
			return p.strs(&t.Require)
		case "pin":
			return p.str(&t.Pin)
		}
		return false
	})
}

// object reads an object, each value by field(key); a key twice is not
// taken.
func (p *parser) object(field func(key string) bool) bool {
	if !p.Next('{') {
		return false
	}
	if p.Next('}') {
		return true
	}
	var seen [12]string
	n := 0
	for {
		var key string
		if !p.str(&key) || !p.Next(':') {
			return false
		}
		for _, k := range seen[:n] {
			if k == key {
				return false
			}
		}
		if n == len(seen) {
			return false
		}
		seen[n] = key
		n++
		if !field(key) {
			return false
		}
		if p.Next('}') {
			return true
		}
		if !p.Next(',') {
			return false
		}
	}
}

// str reads a string of printable ASCII without escapes.
func (p *parser) str(s *string) bool {
	if !p.Next('"') {
		return false
	}
	start := p.I
	for ; p.I < len(p.B); p.I++ {
		switch c := p.B[p.I]; {
		case c == '"':
			*s = string(p.B[start:p.I])
			p.I++
			return true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return false
		}
	}
	return false
}

// again is str for a field whose value repeats (slot of last).
func (p *parser) again(s *string, slot int) bool {
	p.Space()
	if l := p.last[slot]; p.I+len(l)+2 <= len(p.B) && p.B[p.I] == '"' && p.B[p.I+len(l)+1] == '"' && string(p.B[p.I+1:p.I+1+len(l)]) == l {
		*s, p.I = l, p.I+len(l)+2
		return true
	}
	if !p.str(s) {
		return false
	}
	p.last[slot] = *s
	return true
}

func (p *parser) strs(ss *[]string) bool {
	*ss = []string{}
	return p.Array(func() bool {
		var s string
		if !p.str(&s) {
			return false
		}
		*ss = append(*ss, s)
		return true
	})
}

// int32 reads an integer of at most 9 digits, without a leading zero but
// 0 itself.
func (p *parser) int32(v *int32) bool {
	p.Space()
	start := p.I
	if p.I < len(p.B) && p.B[p.I] == '-' {
		p.I++
	}
	digits := p.I
	for p.I < len(p.B) && p.B[p.I] >= '0' && p.B[p.I] <= '9' {
		p.I++
	}
	if nd := p.I - digits; nd == 0 || nd > 9 || nd > 1 && p.B[digits] == '0' {
		return false
	}
	if p.I < len(p.B) {
		switch p.B[p.I] {
		case '.', 'e', 'E':
			return false
		}
	}
	n, err := strconv.ParseInt(string(p.B[start:p.I]), 10, 32)
	*v = int32(n)
	return err == nil
}

// raw reads any JSON value but null, as encoding/json leaves it in a
// json.RawMessage: its bytes, copied, once json.Valid takes them.
func (p *parser) raw(r *json.RawMessage) bool {
	p.Space()
	start := p.I
	if !p.skip(0) {
		return false
	}
	v := p.B[start:p.I]
	if string(v) == "null" || !json.Valid(v) {
		return false
	}
	*r = append(json.RawMessage(nil), v...)
	return true
}

// skip passes over one value (not validated: raw validates it), nested
// at most 64 deep.
func (p *parser) skip(depth int) bool {
	if depth > 64 || p.I >= len(p.B) {
		return false
	}
	switch p.B[p.I] {
	case '{', '[':
		open := p.B[p.I]
		p.I++
		for {
			p.Space()
			if p.I >= len(p.B) {
				return false
			}
			if c := p.B[p.I]; c == '}' && open == '{' || c == ']' && open == '[' {
				p.I++
				return true
			}
			switch p.B[p.I] {
			case ',', ':':
				p.I++
			default:
				if !p.skip(depth + 1) {
					return false
				}
			}
		}
	case '"':
		for p.I++; p.I < len(p.B); p.I++ {
			switch p.B[p.I] {
			case '\\':
				p.I++
			case '"':
				p.I++
				return true
			}
		}
		return false
	}
	start := p.I // a number, true, false or null
	for p.I < len(p.B) {
		switch p.B[p.I] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			return p.I > start
		}
		p.I++
	}
	return p.I > start
}
