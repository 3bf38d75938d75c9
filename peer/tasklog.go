package peer

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Task logs: what a handler says during one run (a lease round: attempt N
// of the API is round N). They stay on the peer that ran the attempt, out
// of the Raft log (they are large, and only the runner has them): a run's
// lines are kept in memory while it runs (the tail of at most maxBytes,
// the cut counted), then written to <data>/logs/ (kept as long as the
// task: files older than the retention are swept). Any peer serves
// GET /v1/tasks/{id}/logs by asking the run's holder (from the task's
// history) over the mesh.

// DefaultMaxLog bounds the log of one attempt, in bytes (the tail is kept).
const DefaultMaxLog = 64 << 10

// LogLine is one line of a task's log.
type LogLine = api.LogLine

// LogPage is a part of an attempt's log, from a line on.
type LogPage struct {
	Lines   []LogLine `json:"lines"`
	Dropped int       `json:"dropped_bytes,omitempty"` // bytes cut from the head to keep the tail within the bound
	Done    bool      `json:"done,omitempty"`          // the attempt ended: no more lines
	Found   bool      `json:"found,omitempty"`         // this peer has the attempt's log
}

type logKey struct {
	task  shard.TaskID
	round shard.Round
}

// attemptLog is the log of one run.
type attemptLog struct {
	Lines   []LogLine `json:"lines"`
	Size    int       `json:"size"`    // bytes of Lines' text
	Dropped int       `json:"dropped"` // bytes cut from the head
	Next    int       `json:"next"`    // seq of the next line
	partial []byte    // a line not ended yet
}

// logStore holds the logs of the runs of this peer.
type logStore struct {
	mu       sync.Mutex
	dir      string // "" = keep finished logs in memory (InMemory peers)
	maxBytes int
	live     map[logKey]*attemptLog // runs that said something, until they end
	mem      map[logKey]*attemptLog // finished, when dir == ""
	memOrder []logKey               // mem in finish order, for its bound
	// silent holds the last maxMemLogs runs that ended without a line, in
	// a ring (silentN counts them all): most runs say nothing, and a map
	// entry made and dropped for each was a tenth of a no-op task's cost
	// on its worker. read scans it, newest first.
	silent  [maxMemLogs]logKey
	silentN int
	swept   time.Time      // last sweep of old files
	sweeps  sync.WaitGroup // sweeps under way (finish starts them)
}

// maxMemLogs bounds the finished logs an in-memory peer keeps.
const maxMemLogs = 1000

func newLogStore(dir string, maxBytes int) *logStore {
	if dir != "" {
		// Owner only: logs hold what tasks print, payloads and results
		// among it.
		_ = os.MkdirAll(dir, 0o700)
	}
	return &logStore{dir: dir, maxBytes: maxBytes, live: map[logKey]*attemptLog{}, mem: map[logKey]*attemptLog{}}
}

// writer returns the writer of run (task, round); lines end at '\n'.
// The run's log is made at its first write; finish ends it.
func (s *logStore) writer(task shard.TaskID, round shard.Round) *logWriter {
	return &logWriter{s: s, k: logKey{task, round}}
}

// logWriter writes one run's log. Its fields are guarded by s.mu.
type logWriter struct {
	s     *logStore
	k     logKey
	l     *attemptLog // nil until the first write
	ended bool        // finish was called: later output is dropped
}

// Write implements io.Writer: whole lines go to the log, a partial one
// waits for its end (or the end of the run).
func (w *logWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.ended {
		return len(p), nil // the run ended: late output is dropped
	}
	l := w.l
	if l == nil {
		l = &attemptLog{Next: 1}
		w.l = l
		w.s.live[w.k] = l
	}
	now := time.Now()
	data := append(l.partial, p...)
	for {
		i := indexByte(data, '\n')
		if i < 0 {
			break
		}
		w.s.add(l, now, string(data[:i]))
		data = data[i+1:]
	}
	l.partial = append([]byte(nil), data...)
	if len(l.partial) > w.s.maxBytes {
		w.s.add(l, now, string(l.partial))
		l.partial = nil
	}
	return len(p), nil
}

// WriteLines adds whole lines, each at its time (a worker's, which
// says when its handler wrote it), after any partial line written before.
func (w *logWriter) WriteLines(texts []string, at []time.Time) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.ended || len(texts) == 0 {
		return
	}
	l := w.l
	if l == nil {
		l = &attemptLog{Next: 1}
		w.l = l
		w.s.live[w.k] = l
	}
	if len(l.partial) > 0 {
		w.s.add(l, at[0], string(l.partial))
		l.partial = nil
	}
	for i, s := range texts {
		w.s.add(l, at[i], strings.TrimRight(s, "\r\n"))
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// add appends a line and cuts the head to keep the tail within maxBytes.
func (s *logStore) add(l *attemptLog, at time.Time, text string) {
	if len(text) > s.maxBytes {
		l.Dropped += len(text) - s.maxBytes
		text = text[len(text)-s.maxBytes:]
	}
	l.Lines = append(l.Lines, LogLine{Seq: l.Next, At: at, Text: text})
	l.Next++
	l.Size += len(text)
	cut := 0
	for l.Size > s.maxBytes && cut < len(l.Lines) {
		l.Size -= len(l.Lines[cut].Text)
		l.Dropped += len(l.Lines[cut].Text)
		cut++
	}
	if cut > 0 {
		l.Lines = append(l.Lines[:0], l.Lines[cut:]...)
	}
}

// finish ends w's run's log: the partial line is kept, and the log goes
// to disk (or to the bounded in-memory set). A second finish does nothing.
func (s *logStore) finish(w *logWriter, keep time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	if now := time.Now(); s.dir != "" && now.Sub(s.swept) > time.Hour {
		// Once an hour, one pass over the directory, in the background: a
		// directory of many runs' logs takes a while to list, and the
		// run's end (an external worker's report, under its hub's lock)
		// waited for it.
		s.swept = now
		s.sweeps.Go(func() { s.sweep(now, keep) })
	}
	k, l := w.k, w.l
	if l == nil {
		s.silent[s.silentN%maxMemLogs] = k
		s.silentN++
		return
	}
	delete(s.live, k)
	if len(l.partial) > 0 {
		s.add(l, time.Now(), string(l.partial))
		l.partial = nil
	}
	// An in-memory peer keeps its logs in memory, and so does every peer
	// with an empty one: most attempts say nothing, and a file each, written
	// under s.mu, made every run's end (a worker's report among them) wait
	// on the disk.
	if s.dir == "" || len(l.Lines) == 0 && l.Dropped == 0 {
		s.mem[k] = l
		s.memOrder = append(s.memOrder, k)
		if len(s.memOrder) > maxMemLogs {
			delete(s.mem, s.memOrder[0])
			s.memOrder = s.memOrder[1:]
		}
		return
	}
	if b, err := json.Marshal(l); err == nil {
		_ = os.WriteFile(s.path(k), b, 0o600)
	}
}

func (s *logStore) path(k logKey) string {
	return filepath.Join(s.dir, base64.RawURLEncoding.EncodeToString([]byte(k.task))+"."+strconv.FormatUint(uint64(k.round), 10)+".json")
}

// read returns the lines of run (task, round) from seq from on.
func (s *logStore) read(task shard.TaskID, round shard.Round, from int) LogPage {
	s.mu.Lock()
	k := logKey{task, round}
	if l := s.live[k]; l != nil {
		p := page(l, from)
		s.mu.Unlock()
		return p
	}
	l := s.mem[k]
	if l == nil && s.wasSilent(k) {
		l = &attemptLog{}
	}
	s.mu.Unlock()
	if l == nil && s.dir != "" {
		b, err := os.ReadFile(s.path(k))
		if err == nil && json.Unmarshal(b, &l) != nil {
			l = nil
		}
	}
	if l == nil {
		return LogPage{Lines: []LogLine{}}
	}
	p := page(l, from)
	p.Done = true
	return p
}

// wasSilent reports whether run k is among the last runs that ended
// without a line. s.mu is held.
func (s *logStore) wasSilent(k logKey) bool {
	for i := range min(s.silentN, maxMemLogs) {
		if s.silent[(s.silentN-1-i)%maxMemLogs] == k {
			return true
		}
	}
	return false
}

func page(l *attemptLog, from int) LogPage {
	p := LogPage{Lines: []LogLine{}, Dropped: l.Dropped, Found: true}
	for _, ln := range l.Lines {
		if ln.Seq >= from {
			p.Lines = append(p.Lines, ln)
		}
	}
	return p
}

// sweep removes the log files older than keep.
func (s *logStore) sweep(now time.Time, keep time.Duration) {
	if s.dir == "" || keep <= 0 {
		return
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > keep {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
		}
	}
}
