package shard

import (
	"strconv"
	"testing"
)

func TestTaskIDSplit(t *testing.T) {
	tests := []struct {
		name  string
		id    TaskID
		group GroupID
		index int
		ok    bool
	}{
		{"simple", TaskIDOf("g1", 3), "g1", 3, true},
		{"dotted group", TaskIDOf("a.b", 0), "a.b", 0, true},
		{"no dot", "abc", "", 0, false},
		{"empty index", "abc.", "", 0, false},
		{"negative", "abc.-1", "", 0, false},
		{"leading dot", ".1", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, i, ok := tt.id.Split()
			if g != tt.group || i != tt.index || ok != tt.ok {
				t.Errorf("Split(%q) = %q, %d, %v; want %q, %d, %v", tt.id, g, i, ok, tt.group, tt.index, tt.ok)
			}
		})
	}
}

// atoi reads what strconv.Atoi reads, and refuses what it refuses.
func TestAtoiAsStrconv(t *testing.T) {
	for _, s := range []string{"0", "7", "007", "42", "+5", "-0", "-3", "1e3", "0x10", " 1", "1 ", "a", "9a",
		"999999999999999999", "9999999999999999999", "99999999999999999999", "9223372036854775807",
		"9223372036854775808", "000000000000000000001", "\xff"} {
		want, err := strconv.Atoi(s)
		got, ok := atoi(s)
		if ok != (err == nil) || ok && got != want {
			t.Errorf("atoi(%q) = %d, %v; strconv.Atoi: %d, %v", s, got, ok, want, err)
		}
	}
}

func TestStateNames(t *testing.T) {
	for _, s := range States() {
		got, ok := ParseState(s.String())
		if !ok || got != s {
			t.Errorf("ParseState(%q) = %v, %v; want %v", s.String(), got, ok, s)
		}
	}
	if _, ok := ParseState("UNKNOWN"); ok {
		t.Errorf("ParseState(UNKNOWN) ok; want not ok")
	}
	for _, s := range []State{Succeeded, Failed, Canceled} {
		if !s.Terminal() {
			t.Errorf("%v.Terminal() = false", s)
		}
	}
}
