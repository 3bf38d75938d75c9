package simulate

import "testing"

func TestFormerRun(t *testing.T) {
	s := &sim{byID: map[string]int{"n1": 0, "n2": 1}}
	s.nodes = []*simNode{{s: s, id: "n1", up: true, boots: 2}, {s: s, idx: 1, id: "n2", boots: 3}}
	for _, tt := range []struct {
		holder string
		former bool
	}{
		{"n1#1", true},  // n1 restarted since
		{"n1#2", false}, // its present run
		{"n1", false},   // no boot: an older peer's holder
		{"n9#1", false}, // not a node of the run
		{"n2#1", false}, // down: the owners' failure detector has it
	} {
		if got := s.formerRun(tt.holder); got != tt.former {
			t.Errorf("formerRun(%q) = %v; want %v", tt.holder, got, tt.former)
		}
	}
}
