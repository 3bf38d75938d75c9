package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// startLogPeer starts a real peer on disk (Badger, libp2p on loopback) with cfg's
// builtins and log bound.
func startLogPeer(t testing.TB, cfg Config) (*Peer, *api.Client) {
	t.Helper()
	cfg.DataDir, cfg.HTTPAddr, cfg.Partitions = t.TempDir(), "127.0.0.1:0", 16
	cfg.Slots = max(cfg.Slots, 2)
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Ready()
	t.Cleanup(func() { cancel(); <-done })
	return p, &api.Client{BaseURL: "http://" + p.Addr()}
}

func submitOne(t testing.TB, c *api.Client, handler, payload string) string {
	t.Helper()
	res, err := c.SubmitTask(context.Background(), &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: handler, Payload: json.RawMessage(payload)}})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// TestTaskLogsFollow: a Go handler's Call.Log lines reach a follower while
// the handler still runs; the follow ends once the task is terminal.
func TestTaskLogsFollow(t *testing.T) { synctest.Test(t, testTaskLogsFollow) }

func testTaskLogsFollow(t *testing.T) {
	mp := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2, Logger: slog.New(slog.DiscardHandler)})
	p, c := mp.p, mp.c
	release := make(chan struct{})
	_ = p.Handlers().Register("talk", func(ctx context.Context, call Call) ([]byte, error) {
		call.Log.Info("step one", "n", 1)
		<-release
		call.Log.Info("step two")
		return nil, nil
	})
	id := submitOne(t, c, "talk", `1`)
	lines := make(chan string, 16)
	ended := make(chan error, 1)
	go func() {
		ended <- c.FollowLogs(t.Context(), id, 0, func(ev string, data []byte) error {
			if ev == "line" {
				var ln api.LogLine
				_ = json.Unmarshal(data, &ln)
				lines <- ln.Text
			}
			return nil
		})
	}()
	select {
	case l := <-lines:
		if !strings.Contains(l, "step one") {
			t.Fatalf("first line %q; want step one", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no line while the handler runs")
	}
	close(release)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if l := <-lines; !strings.Contains(l, "step two") {
		t.Fatalf("second line %q; want step two", l)
	}
	l, err := c.TaskLogs(t.Context(), id, 0)
	if err != nil || len(l.Lines) != 2 || !l.Done || !l.Terminal || l.Attempt != 1 || l.Peer != p.ID() {
		t.Fatalf("logs after the end = %+v, %v", l, err)
	}
	assertAPIError(t, "attempt 9", func() error { _, err := c.TaskLogs(t.Context(), id, 9); return err }, http.StatusBadRequest, "no attempt 9")
	assertAPIError(t, "unknown task", func() error { _, err := c.TaskLogs(t.Context(), id+"9", 0); return err }, http.StatusNotFound, "")
}

// TestTaskLogsExecAndBound: exec's stderr lines are the log; a log over
// MaxLog keeps its tail and counts the cut.
func TestTaskLogsExecAndBound(t *testing.T) {
	_, c := startLogPeer(t, Config{MaxLog: 1024, Builtins: BuiltinConfig{Exec: map[string][]string{
		"say":  {"sh", "-c", "echo out; echo from-stderr >&2"},
		"loud": {"sh", "-c", "i=0; while [ $i -lt 200 ]; do echo line-$i-padding-padding-padding >&2; i=$((i+1)); done"},
	}}})
	for _, tt := range []struct {
		cmd, last string
		cut       bool
	}{{"say", "from-stderr", false}, {"loud", "line-199-padding-padding-padding", true}} {
		id := submitOne(t, c, "exec", `{"command":"`+tt.cmd+`"}`)
		if tk, err := c.GetTask(t.Context(), id, 10*time.Second); err != nil || tk.State != "SUCCEEDED" {
			t.Fatalf("%s: %+v, %v", tt.cmd, tk, err)
		}
		l, err := c.TaskLogs(t.Context(), id, 1)
		if err != nil || len(l.Lines) == 0 || l.Lines[len(l.Lines)-1].Text != tt.last || (l.DroppedBytes > 0) != tt.cut {
			t.Fatalf("%s: logs %+v, %v; want last %q, cut %v", tt.cmd, l, err, tt.last, tt.cut)
		}
		size := 0
		for _, ln := range l.Lines {
			size += len(ln.Text)
		}
		if size > 1024 {
			t.Errorf("%s: %d bytes kept; want <= 1024", tt.cmd, size)
		}
	}
}

// BenchmarkLogsFollowLatency measures how long a line an exec task prints
// to stderr takes to reach a follower (`needle logs -f`): the command
// prints its clock, the follower compares with its own on receipt.
func BenchmarkLogsFollowLatency(b *testing.B) {
	_, c := startLogPeer(b, Config{Builtins: BuiltinConfig{Exec: map[string][]string{
		"stamp": {"sh", "-c", "sleep 0.3; date +%s%N >&2; sleep 0.5"},
	}}})
	var total time.Duration
	worst := time.Duration(0)
	for range b.N {
		id := submitOne(b, c, "exec", `{"command":"stamp"}`)
		got := errors.New("no line")
		err := c.FollowLogs(context.Background(), id, 0, func(ev string, data []byte) error {
			if ev != "line" {
				return nil
			}
			var ln api.LogLine
			_ = json.Unmarshal(data, &ln)
			ns, err := strconv.ParseInt(strings.TrimSpace(ln.Text), 10, 64)
			if err != nil {
				return fmt.Errorf("line %q", ln.Text)
			}
			d := time.Since(time.Unix(0, ns))
			total += d
			worst = max(worst, d)
			got = nil
			return nil
		})
		if err != nil || got != nil {
			b.Fatal(err, got)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/line")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}

// An attempt that logged nothing writes no file (a file per run, written
// under the store's lock, slowed every run's end), and still reads as an
// empty, finished log; one that logged writes its file.
func TestTaskLogsEmptyWritesNoFile(t *testing.T) {
	dir := t.TempDir()
	s := newLogStore(dir, 1<<10)
	s.finish(s.writer("g.0", 1), time.Hour)
	w := s.writer("g.1", 1)
	w.Write([]byte("said something\n"))
	s.finish(w, time.Hour)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != filepath.Base(s.path(logKey{"g.1", 1})) {
		t.Fatalf("log files %v, %v; want only g.1's", ents, err)
	}
	if p := s.read("g.0", 1, 0); !p.Found || !p.Done || len(p.Lines) != 0 {
		t.Errorf("empty log = %+v; want found, done, no lines", p)
	}
	if p := s.read("g.1", 1, 0); !p.Done || len(p.Lines) != 1 || p.Lines[0].Text != "said something" {
		t.Errorf("g.1's log = %+v; want its line", p)
	}
}

// Runs that say nothing leave no map entry behind: the last maxMemLogs of
// them read as empty, finished logs (older ones as not found, as an
// evicted in-memory log did), a write after the end is dropped, a second
// finish changes nothing, and a run still silent while it runs reads as
// not found yet, not done.
func TestTaskLogsSilentRuns(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s := newLogStore(dir, 1<<10)
		running := s.writer("run.0", 1)
		if p := s.read("run.0", 1, 0); p.Found || p.Done {
			t.Errorf("dir %q: a silent running run reads %+v; want not found, not done", dir, p)
		}
		for i := range maxMemLogs + 1 {
			w := s.writer(shard.TaskID(fmt.Sprintf("g.%d", i)), 1)
			s.finish(w, time.Hour)
			s.finish(w, time.Hour)
			w.Write([]byte("too late\n"))
		}
		if len(s.live) != 0 || len(s.mem) != 0 {
			t.Errorf("dir %q: %d live and %d kept logs after silent runs; want none", dir, len(s.live), len(s.mem))
		}
		if p := s.read("g.0", 1, 0); p.Found {
			t.Errorf("dir %q: the oldest silent run, past the bound, reads %+v; want not found", dir, p)
		}
		for _, id := range []shard.TaskID{"g.1", shard.TaskID(fmt.Sprintf("g.%d", maxMemLogs))} {
			if p := s.read(id, 1, 0); !p.Found || !p.Done || len(p.Lines) != 0 {
				t.Errorf("dir %q: silent run %s reads %+v; want found, done, no lines", dir, id, p)
			}
		}
		running.Write([]byte("now\n"))
		if p := s.read("run.0", 1, 0); !p.Found || p.Done || len(p.Lines) != 1 {
			t.Errorf("dir %q: a running run that wrote reads %+v; want found, not done, its line", dir, p)
		}
		s.finish(running, time.Hour)
		if p := s.read("run.0", 1, 0); !p.Found || !p.Done || len(p.Lines) != 1 || p.Lines[0].Text != "now" {
			t.Errorf("dir %q: a finished run that wrote reads %+v; want found, done, its line", dir, p)
		}
	}
}

// The first run to end in an hour sweeps the log files older than the
// retention, in the background: the run's end does not wait for the
// directory's listing.
func TestTaskLogsSweepOldFiles(t *testing.T) {
	dir := t.TempDir()
	s := newLogStore(dir, 1<<10)
	old, fresh := filepath.Join(dir, "old.1.json"), filepath.Join(dir, "fresh.1.json")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte(`{"lines":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	s.finish(s.writer("g.0", 1), time.Hour)
	s.sweeps.Wait()
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the log file older than the retention is still there (%v)", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the fresh log file is gone: %v", err)
	}
	// Within the hour, no other sweep.
	if err := os.Chtimes(fresh, long, long); err != nil {
		t.Fatal(err)
	}
	s.finish(s.writer("g.1", 1), time.Hour)
	s.sweeps.Wait()
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a second sweep within the hour removed %s: %v", fresh, err)
	}
}
