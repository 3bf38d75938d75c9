package node

import (
	"runtime"
	"slices"
	"testing"
)

// A sliceMark tells the very slice it marked from an equal copy, and does
// not keep the slice alive: a member remembers every sender's last list
// and address book, and 1,000 simulated peers kept hundreds of MB of old
// ones alive through them.
func TestSliceMarkKeepsNothingAlive(t *testing.T) {
	list := []string{"a", "b", "c"}
	k := markOf(list)
	if !k.is(list) {
		t.Fatal("the marked slice is not recognised")
	}
	if k.is(slices.Clone(list)) || k.is(list[:2]) || k.is(nil) {
		t.Fatal("a copy, a prefix or nil taken for the marked slice")
	}
	if (sliceMark[string]{}).is(list) || markOf([]string(nil)).is(nil) {
		t.Fatal("an empty mark matches")
	}
	list = nil
	runtime.GC() // a full collection: the slice, unreachable but for the mark, is freed
	if k.first.Value() != nil {
		t.Fatal("the mark kept its slice alive")
	}
}
