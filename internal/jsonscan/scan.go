// Package jsonscan holds what needle's hand-written JSON readers share: a
// position in a byte slice, white space, single bytes, arrays. The API's
// reader of submissions (peer/api) and the bench's reader of group
// answers (bench) each keep their own rules of what they take, and leave
// the rest to encoding/json.
package jsonscan

// Scanner reads JSON from B at I. Its methods report false for what they
// do not take, leaving I anywhere.
type Scanner struct {
	B []byte
	I int
}

// Space skips white space.
func (s *Scanner) Space() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Next skips white space and takes byte c.
func (s *Scanner) Next(c byte) bool {
	s.Space()
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++
		return true
	}
	return false
}

// Peek skips white space and returns the next byte, 0 at the end.
func (s *Scanner) Peek() byte {
	s.Space()
	if s.I < len(s.B) {
		return s.B[s.I]
	}
	return 0
}

// Array reads an array, each element by elem.
func (s *Scanner) Array(elem func() bool) bool {
	if !s.Next('[') {
		return false
	}
	if s.Next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.Next(']') {
			return true
		}
		if !s.Next(',') {
			return false
		}
	}
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.Space()
	return s.I == len(s.B)
}
