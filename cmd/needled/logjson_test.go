package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// With --log-format json a duration is written as the text format writes
// it ("20s"), not as nanoseconds: the drain's "timeout":20000000000 and
// "took":3224000000 of trial s82.
func TestJSONLogDurations(t *testing.T) {
	var out bytes.Buffer
	m := NewMain()
	m.Stderr, m.LogFormat, m.LogLevel = &out, "json", "info"
	log, err := m.logger()
	if err != nil {
		t.Fatal(err)
	}
	log.Info("draining", "timeout", 20*time.Second, "took", 3224*time.Millisecond, "n", 3)
	var rec map[string]any
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
		t.Fatalf("record %q: %v", out.String(), err)
	}
	if rec["timeout"] != "20s" || rec["took"] != "3.224s" || rec["n"] != float64(3) {
		t.Errorf("record %s; want timeout \"20s\", took \"3.224s\", n 3", out.String())
	}
}
