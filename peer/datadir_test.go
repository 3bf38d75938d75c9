package peer

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The task logs dir and its files are the owner's alone: they hold what
// tasks print, payloads and results among it (they were 0755 and 0644).
func TestDataDirTaskLogsOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "logs")
	s := newLogStore(dir, 1<<10)
	w := s.writer("g.1", 1)
	w.Write([]byte("secret result\n"))
	s.finish(w, time.Hour)
	for _, path := range []string{filepath.Dir(dir), dir} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want mode 0700", path, st.Mode(), err)
		}
	}
	if st, err := os.Stat(s.path(logKey{"g.1", 1})); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("log file: %v, %v; want mode 0600", st.Mode(), err)
	}
}

// A data dir that others may read is warned about, naming its mode, and
// left as it is; one of the owner's alone, or none yet, is not.
func TestDataDirWarnsWideMode(t *testing.T) {
	wide, own := t.TempDir(), t.TempDir()
	if err := os.Chmod(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(own, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir  string
		warn bool
	}{{wide, true}, {own, false}, {filepath.Join(own, "new"), false}} {
		var buf bytes.Buffer
		warnDataDirMode(tt.dir, slog.New(slog.NewTextHandler(&buf, nil)))
		got := buf.String()
		if warned := strings.Contains(got, "level=WARN"); warned != tt.warn {
			t.Errorf("%s: log %q; want a warning: %v", tt.dir, got, tt.warn)
		}
		if tt.warn && !strings.Contains(got, "mode=0755") {
			t.Errorf("%s: log %q; want it to name mode=0755", tt.dir, got)
		}
	}
	if st, _ := os.Stat(wide); st.Mode().Perm() != 0o755 {
		t.Errorf("the wide dir became %v; want it left 0755", st.Mode().Perm())
	}
}
