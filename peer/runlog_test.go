package peer

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
)

// TestRunLogWritesAsTextHandler: a run's logger writes what a text
// handler on the run's log writes, with attributes and groups, drops
// Debug as one with no options does.
func TestRunLogWritesAsTextHandler(t *testing.T) {
	var got, want bytes.Buffer
	for _, l := range []*slog.Logger{newRunLogger(&got), slog.New(slog.NewTextHandler(&want, nil))} {
		l.Debug("hidden")
		l.Info("step", "n", 1)
		l.With("task", "t1").WithGroup("g").Warn("slow", "ms", 250)
		l.Error("boom", "err", "disk")
	}
	times := regexp.MustCompile(`time=\S+ `)
	g, w := times.ReplaceAllString(got.String(), ""), times.ReplaceAllString(want.String(), "")
	if g != w || w == "" {
		t.Fatalf("run log wrote\n%s\nwant\n%s", g, w)
	}
}
