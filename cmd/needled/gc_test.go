package main

import (
	"runtime/debug"
	"testing"
)

func TestTuneGCLeavesAGivenGOGC(t *testing.T) {
	prev := debug.SetGCPercent(77)
	defer debug.SetGCPercent(prev)
	if got := tuneGC(func(k string) string { return map[string]string{"GOGC": "200"}[k] }); got != -1 {
		t.Fatalf("tuneGC with GOGC=200 = %d, want -1 (left alone)", got)
	}
	if got := debug.SetGCPercent(77); got != 77 {
		t.Fatalf("GC percent after tuneGC with GOGC set = %d, want 77 (untouched)", got)
	}
}

func TestTuneGCSetsItsDefault(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	if got := tuneGC(func(string) string { return "" }); got != gcPercent {
		t.Fatalf("tuneGC without GOGC = %d, want %d", got, gcPercent)
	}
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Fatalf("GC percent after tuneGC = %d, want %d", got, gcPercent)
	}
}
