package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Raft's warnings name their partition, and the one every partition logs
// at each restart (a campaign waiting for its configuration) is a debug
// line: a restart of a peer of 256 partitions logged 256 warnings that
// named no partition.
func TestRaftLoggerNamesThePartition(t *testing.T) {
	var buf bytes.Buffer
	l := raftLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})).With(keyPart, 7)}
	l.Warningf("%x cannot campaign at term %d since there are still pending configuration changes to apply", 1, 4)
	if buf.Len() != 0 {
		t.Fatalf("the restart's campaign line was a warning: %s", buf.String())
	}
	l.Warningf("%x something else at term %d", 1, 4)
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "partition=7") {
		t.Fatalf("warning = %q; want it with partition=7", out)
	}
}
