package shard

import (
	"testing"
	"unsafe"
)

// A task and the taskEvents of its history must stay small: a peer under
// W1 holds millions of tasks with three events each (a TaskEvent took 96
// bytes, a task 280 with two slices of dependency edges most never use).
func TestTaskEventSize(t *testing.T) {
	if n := unsafe.Sizeof(taskEvent{}); n > 48 {
		t.Errorf("taskEvent takes %d bytes; want at most 48", n)
	}
	// 248 with its own spec fields (name, payload, stage, item: specs.go),
	// where a TaskSpec of its own took 184 more.
	if n := unsafe.Sizeof(task{}); n > 248 {
		t.Errorf("task takes %d bytes; want at most 248", n)
	}
	var s Shard
	a, b := string([]byte("n1#boot")), string([]byte("n1#boot"))
	if h1, h2 := s.holderOf(a), s.holderOf(b); unsafe.StringData(h1) != unsafe.StringData(h2) {
		t.Error("two leases of one holder keep two copies of its name")
	}
}
