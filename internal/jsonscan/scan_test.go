package jsonscan

import "testing"

func TestScanner(t *testing.T) {
	s := Scanner{B: []byte(" [ 1 ,2,\n3 ]\t x")}
	var got []byte
	ok := s.Array(func() bool {
		s.Space()
		got = append(got, s.B[s.I])
		s.I++
		return true
	})
	if !ok || string(got) != "123" {
		t.Fatalf("Array = %v, read %q; want true, 123", ok, got)
	}
	if s.End() || s.Peek() != 'x' || s.Next('y') || !s.Next('x') || !s.End() || s.Peek() != 0 {
		t.Fatalf("after the array at %d: want x, then the end", s.I)
	}
	for _, bad := range []string{"", "[", "[1", "[1,", "[1 2]", "{}"} {
		s := Scanner{B: []byte(bad)}
		if s.Array(func() bool { s.Space(); ok := s.I < len(s.B) && s.B[s.I] == '1'; s.I++; return ok }) {
			t.Errorf("Array took %q", bad)
		}
	}
}
