package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/needle-mesh/needle/peer/allowlist"
)

// defaultMaxOutput is BuiltinConfig.MaxOutput when it is zero.
const defaultMaxOutput = 1 << 20

// BuiltinConfig configures the built-in handlers. The zero value is valid:
// exec and http then refuse every request, because their allow-lists are
// empty.
type BuiltinConfig struct {
	// Exec maps a command name usable in an exec task's payload to the argv
	// prefix it runs. argv[0] is an absolute path, or a name looked up in
	// PATH once, at registration. Only these commands can run; the request
	// only appends arguments and is never passed through a shell.
	// Default: empty (exec refuses every command).
	Exec map[string][]string
	// ExecEnv lists the environment variables an exec task's payload may
	// set ("env"); the daemon's own value of such a name is passed on when
	// the task sets none. Any other name in a payload fails the task
	// permanently. The child's environment is otherwise minimal (see
	// execEnv): the daemon's secrets never reach it. Names the dynamic
	// loader or a shell act on (LD_*, PATH, BASH_ENV, ...) and NEEDLE_*
	// cannot be allowed. Default: empty.
	ExecEnv []string
	// ExecDir is where exec runs its commands: each attempt in a fresh,
	// empty directory of its own (0700) under the peer's directory of it,
	// ExecDir/<peer id> (0700; Registry.SetPeer), which is also the
	// child's TMPDIR unless the task's env sets one, and which is removed
	// with all it holds when the attempt ends (success, failure, timeout
	// or cancel), so that tasks do not litter each other's files or the
	// daemon's. RegisterBuiltins creates ExecDir (0700) when Exec names a
	// command; SetPeer creates the peer's directory, and removes the
	// attempt directories an earlier run of the peer left there (a
	// crash), and no other: peers may share an ExecDir. A directory of
	// these whose owner lost access to it (a task's chmod 000 ..) gets
	// back 0700 at start and before an attempt. Until SetPeer, attempts
	// go in ExecDir itself. Default "": the attempts' directories are
	// made under os.TempDir(), and no leftover is removed.
	ExecDir string
	// HTTPAllow lists the URL prefixes an http task may POST to: scheme,
	// host[:port] and a path prefix. Targets are compared after parsing and
	// normalising (lower-case scheme and host, default port, path.Clean),
	// with a "/" boundary: "http://127.0.0.1:9000/hooks/" allows
	// "http://127.0.0.1:9000/hooks/x" but neither ".../hooksX" nor
	// ".../hooks/../admin". Default: empty (http refuses every URL).
	HTTPAllow []string
	// HTTPClient sends the http tasks' requests. Default (nil): a client
	// with a 30 s timeout that follows at most 10 redirects, and only to
	// URLs on HTTPAllow. A custom client is used as is, redirects included.
	HTTPClient *http.Client
	// MaxOutput bounds, in bytes, each of exec's captured stdout and stderr
	// and the response body read by http. More is a permanent error, never
	// a silent truncation. Default (0): 1 MiB.
	MaxOutput int
}

// Validate reports a configuration that RegisterBuiltins would reject,
// other than an exec command missing from PATH.
func (c BuiltinConfig) Validate() error {
	if c.MaxOutput < 0 {
		return fmt.Errorf("%w: MaxOutput %d is negative", ErrBuiltins, c.MaxOutput)
	}
	for name, argv := range c.Exec {
		if name == "" || len(argv) == 0 || argv[0] == "" {
			return fmt.Errorf("%w: exec command %q: empty name or argv", ErrBuiltins, name)
		}
	}
	for _, name := range c.ExecEnv {
		if err := checkExecEnvName(name); err != nil {
			return fmt.Errorf("%w: ExecEnv %q: %w", ErrBuiltins, name, err)
		}
	}
	if _, err := allowlist.Parse(c.HTTPAllow); err != nil {
		return fmt.Errorf("%w: HTTPAllow %w", ErrBuiltins, err)
	}
	return nil
}

// ErrBuiltins is wrapped by the errors of a BuiltinConfig that
// NewBuiltins or RegisterBuiltins refuses.
var ErrBuiltins = errors.New("handler: builtins")

// builtins holds the resolved configuration shared by exec and http.
type builtins struct {
	exec      map[string][]string    // command name -> argv, argv[0] absolute
	envAllow  map[string]bool        // names an exec payload may set (ExecEnv)
	execDir   string                 // ExecDir ("": the attempts' directories in os.TempDir())
	peerDir   atomic.Pointer[string] // ExecDir/<peer id>, the attempts' parent, once SetPeer ran
	allow     allowlist.List         // parsed HTTPAllow
	client    *http.Client           // never nil
	maxOutput int                    // bytes, > 0
}

// NewBuiltins returns a new Registry holding the built-ins configured by
// cfg (RegisterBuiltins).
func NewBuiltins(cfg BuiltinConfig) (*Registry, error) {
	r := NewRegistry()
	if err := RegisterBuiltins(r, cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// RegisterBuiltins registers echo, sleep, fail, exec and http in r. It
// resolves the exec commands in PATH and parses the http allow-list now,
// so a bad configuration fails here rather than on the first task.
func RegisterBuiltins(r *Registry, cfg BuiltinConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	b := &builtins{maxOutput: cfg.MaxOutput, client: cfg.HTTPClient}
	if b.maxOutput == 0 {
		b.maxOutput = defaultMaxOutput
	}
	var err error
	if b.exec, err = resolveExec(cfg.Exec); err != nil {
		return err
	}
	if len(b.exec) > 0 && cfg.ExecDir != "" {
		if err := ownDir(cfg.ExecDir); err != nil {
			return fmt.Errorf("%w: exec dir %s (needled --exec-dir): %w", ErrBuiltins, cfg.ExecDir, err)
		}
		b.execDir = cfg.ExecDir
		r.setPeer = b.setPeer
	}
	b.envAllow = make(map[string]bool, len(cfg.ExecEnv))
	for _, name := range cfg.ExecEnv {
		b.envAllow[name] = true
	}
	b.allow, _ = allowlist.Parse(cfg.HTTPAllow) // checked by Validate
	if b.client == nil {
		b.client = b.defaultClient()
	}
	handlers := []struct {
		name string
		h    Func
	}{
		{"echo", echoHandler},
		{"sleep", sleepHandler},
		{"fail", failHandler},
		{"exec", b.execHandler},
		{"http", b.httpHandler},
	}
	for _, e := range handlers {
		if err := r.Register(e.name, e.h); err != nil {
			return err
		}
	}
	return nil
}

// execDirs returns the exec dir and the attempts' parent: the peer's
// directory of it once SetPeer ran, else the exec dir itself; "", ""
// without an exec dir.
func (b *builtins) execDirs() (root, parent string) {
	if d := b.peerDir.Load(); d != nil {
		return b.execDir, *d
	}
	return b.execDir, b.execDir
}

// setPeer makes ExecDir/<id> the attempts' parent, and removes the
// attempt directories an earlier run of the peer left there.
func (b *builtins) setPeer(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) {
		return fmt.Errorf("%w: peer id %q: not a directory name", ErrBuiltins, id)
	}
	dir := filepath.Join(b.execDir, id)
	if err := peerExecDir(b.execDir, dir); err != nil {
		return fmt.Errorf("%w: exec dir %s (needled --exec-dir): %w", ErrBuiltins, dir, err)
	}
	if err := sweepAttempts(dir); err != nil {
		return fmt.Errorf("%w: exec dir %s (needled --exec-dir): %w", ErrBuiltins, dir, err)
	}
	b.peerDir.Store(&dir)
	return nil
}

// echoHandler returns the payload, or null when it is empty. It ignores
// the task's inputs: its result is the payload unchanged.
func echoHandler(_ context.Context, c Call) ([]byte, error) {
	if len(bytes.TrimSpace(c.Payload)) == 0 {
		return []byte("null"), nil
	}
	return bytes.Clone(c.Payload), nil
}

// sleepPayload is the sleep handler's payload in its object form.
type sleepPayload struct {
	MS *float64 `json:"ms"` // milliseconds, >= 0
}

// sleepHandler waits for the payload's ms, or until ctx is done.
func sleepHandler(ctx context.Context, c Call) ([]byte, error) {
	d, err := parseSleep(c.Payload)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return bytes.Clone(c.Payload), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// parseSleep decodes {"ms": N} or a bare N into a duration.
func parseSleep(payload []byte) (time.Duration, error) {
	trimmed := bytes.TrimSpace(payload)
	var ms float64
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var p sleepPayload
		if err := decodePayload("sleep", trimmed, &p); err != nil {
			return 0, err
		}
		if p.MS == nil {
			return 0, Permanent(errors.New(`sleep: payload field "ms" is required`))
		}
		ms = *p.MS
	} else if err := json.Unmarshal(trimmed, &ms); err != nil {
		return 0, Permanent(fmt.Errorf(`sleep: payload field "ms": want a number of milliseconds, got %.40q`, trimmed))
	}
	const maxMS = float64(math.MaxInt64 / int64(time.Millisecond))
	if ms < 0 || ms > maxMS || math.IsNaN(ms) {
		return 0, Permanent(fmt.Errorf(`sleep: payload field "ms": %v is out of range [0, %.0f]`, ms, maxMS))
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// failPayload is the fail handler's payload.
type failPayload struct {
	Permanent bool   `json:"permanent"` // wrap the error in Permanent
	Message   string `json:"message"`   // error text; default "fail handler"
}

// failHandler always fails, permanently if the payload asks for it.
func failHandler(_ context.Context, c Call) ([]byte, error) {
	var p failPayload
	if len(bytes.TrimSpace(c.Payload)) > 0 {
		if err := decodePayload("fail", c.Payload, &p); err != nil {
			return nil, err
		}
	}
	if p.Message == "" {
		p.Message = "fail handler"
	}
	err := errors.New(p.Message)
	if p.Permanent {
		return nil, Permanent(err)
	}
	return nil, err
}

// decodePayload strictly decodes a JSON object payload into v (unknown
// fields and trailing data are errors). Its errors are permanent and name
// the handler and, where known, the field. sleep and fail, whose result is
// their payload, accept unknown fields: callers tag payloads with their own
// data.
func decodePayload(handler string, payload []byte, v any) error {
	if len(bytes.TrimSpace(payload)) == 0 {
		return Permanent(fmt.Errorf("%s: payload is empty; want a JSON object", handler))
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if handler != "sleep" && handler != "fail" {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return Permanent(fmt.Errorf("%s: payload field %q: want %s, got %s",
			handler, typeErr.Field, typeErr.Type, typeErr.Value))
	default:
		return Permanent(fmt.Errorf("%s: payload: %w", handler, err))
	}
}

// capBuffer collects at most limit bytes. A write past the limit fails,
// sets over and calls onOver (once), so output is never silently cut.
type capBuffer struct {
	buf    bytes.Buffer
	limit  int
	over   bool
	onOver func() // may be nil
}

// errOutputLimit is returned by capBuffer.Write past the limit.
var errOutputLimit = errors.New("handler: output limit exceeded")

// Write implements io.Writer.
func (b *capBuffer) Write(p []byte) (int, error) {
	if b.over || b.buf.Len()+len(p) > b.limit {
		if !b.over && b.onOver != nil {
			b.onOver()
		}
		b.over = true
		return 0, errOutputLimit
	}
	return b.buf.Write(p)
}

// identity is one field of a run's identity, as exec and http pass it.
type identity struct {
	env    string // the exec child's variable
	header string // the http request's header
	value  string
}

// callIdentity is what exec and http tell the program or service they call
// about the run, so that it can deduplicate: a task runs at least once, and
// an attempt whose lease was lost may run again (the same attempt number in
// a later round) while the first is still going. (task, round) names one
// run; (task, attempt) one retry of the task.
// The run's trace context goes along when it has one (TRACEPARENT, the
// variable OpenTelemetry's environment propagation reads, and the W3C
// traceparent header), so that what they do joins the task's trace.
func callIdentity(c Call) []identity {
	ids := []identity{
		{"NEEDLE_TASK_ID", "X-Needle-Task-Id", string(c.Task)},
		{"NEEDLE_GROUP_ID", "X-Needle-Group-Id", string(c.Task.Group())},
		{"NEEDLE_ATTEMPT", "X-Needle-Attempt", strconv.Itoa(c.Attempt)},
		{"NEEDLE_ROUND", "X-Needle-Round", strconv.FormatUint(uint64(c.Round), 10)},
	}
	if c.Shards > 0 {
		ids = append(ids, identity{"NEEDLE_SHARD", "X-Needle-Shard", strconv.Itoa(c.Shard)},
			identity{"NEEDLE_SHARDS", "X-Needle-Shards", strconv.Itoa(c.Shards)})
	}
	if c.Trace != "" {
		ids = append(ids, identity{"TRACEPARENT", "traceparent", c.Trace})
	}
	return ids
}
