package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// execWaitDelay bounds how long exec waits for the child's output pipes to
// close after it was killed or exited.
const execWaitDelay = 2 * time.Second

// execStderrTail bounds the stderr excerpt in an ExecExitError, in bytes.
const execStderrTail = 512

// execPayload is the exec handler's payload.
type execPayload struct {
	Command string            `json:"command"` // a key of BuiltinConfig.Exec
	Args    []string          `json:"args"`    // appended to the argv prefix, never parsed
	Stdin   *string           `json:"stdin"`   // optional; default: the inputs document, or no input
	Env     map[string]string `json:"env"`     // optional; names on BuiltinConfig.ExecEnv only
}

// execResult is the exec handler's result.
type execResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// ExecExitError is the (retryable) error of an exec task whose command
// exited with a non-zero status or was killed by a signal.
type ExecExitError struct {
	Command    string // the payload's command name
	Code       int    // exit status; -1 if killed by a signal
	StderrTail string // the last <= 512 bytes of stderr
}

func (e *ExecExitError) Error() string {
	if e.StderrTail == "" {
		return fmt.Sprintf("exec: %s exited with code %d", e.Command, e.Code)
	}
	return fmt.Sprintf("exec: %s exited with code %d: %s", e.Command, e.Code, e.StderrTail)
}

// resolveExec copies the exec allow-list, resolving each argv[0] in PATH.
func resolveExec(cmds map[string][]string) (map[string][]string, error) {
	out := make(map[string][]string, len(cmds))
	for name, argv := range cmds {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			return nil, fmt.Errorf("%w: exec command %q: %w", ErrBuiltins, name, err)
		}
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("%w: exec command %q: %q does not resolve to an absolute path", ErrBuiltins, name, argv[0])
		}
		resolved := slices.Clone(argv)
		resolved[0] = path
		out[name] = resolved
	}
	return out, nil
}

// execDeniedEnv lists variables no task may set, allow-listed or not:
// they make the dynamic loader or a shell run code the allow-list did not
// name, or they are the daemon's own.
var execDeniedEnv = []string{"BASH_ENV", "ENV", "IFS", "PATH", "PS4", "SHELLOPTS", "BASHOPTS", "GCONV_PATH"}

// execDeniedEnvPrefix lists prefixes of such variables.
var execDeniedEnvPrefix = []string{"LD_", "DYLD_", "BASH_FUNC_", "NEEDLE_"}

// execBaseEnv are the daemon's variables every child gets (when set):
// where programs are and how to print, nothing that configures an
// interpreter or holds a secret. TMPDIR is the attempt's directory
// (execEnv).
var execBaseEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ"}

// execDefaultPath is the child's PATH when the daemon has none.
const execDefaultPath = "/usr/local/bin:/usr/bin:/bin"

// checkExecEnvName checks a name for BuiltinConfig.ExecEnv.
func checkExecEnvName(k string) error {
	switch {
	case k == "" || strings.ContainsAny(k, "=\x00"):
		return errors.New("not a variable name")
	case slices.Contains(execDeniedEnv, k) || slices.ContainsFunc(execDeniedEnvPrefix, func(pre string) bool {
		return strings.HasPrefix(k, pre)
	}):
		return errors.New("the loader, a shell or the daemon acts on it: it cannot be allowed")
	}
	return nil
}

// execArgv validates the payload against the allow-lists and returns the
// argv.
func (b *builtins) execArgv(p *execPayload) ([]string, error) {
	prefix, ok := b.exec[p.Command]
	if !ok {
		return nil, Permanent(fmt.Errorf("exec: command %q is not on this peer's allow-list", p.Command))
	}
	for i, a := range p.Args {
		if strings.ContainsRune(a, 0) {
			return nil, Permanent(fmt.Errorf("exec: payload field \"args\"[%d] contains a NUL byte", i))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		if strings.ContainsRune(p.Env[k], 0) {
			return nil, Permanent(fmt.Errorf("exec: payload field \"env\": variable %q contains a NUL byte", k))
		}
		if !b.envAllow[k] {
			return nil, Permanent(fmt.Errorf("exec: payload field \"env\": variable %q is not on this peer's allow-list (needled --exec-env)", k))
		}
	}
	return append(slices.Clone(prefix), p.Args...), nil
}

// execEnv returns the environment of an exec child, sorted: the daemon's
// execBaseEnv, the allow-listed names (the task's value, else the
// daemon's), the run's identity (callIdentity, as NEEDLE_TASK_ID,
// NEEDLE_GROUP_ID, NEEDLE_ATTEMPT and NEEDLE_ROUND: a task cannot set
// NEEDLE_ names), TMPDIR the attempt's directory dir unless the task sets
// it, nothing else. Every variable a child gets is added here.
func (b *builtins) execEnv(c Call, env map[string]string, dir string) []string {
	vars := map[string]string{"PATH": execDefaultPath}
	for _, k := range execBaseEnv {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	for k := range b.envAllow {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	if dir != "" {
		vars["TMPDIR"] = dir
	}
	maps.Copy(vars, env) // checked against the allow-list by execArgv
	for _, id := range callIdentity(c) {
		vars[id.env] = id.value
	}
	out := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// execInputs is what exec writes to the stdin of a task with inputs.
type execInputs struct {
	Payload json.RawMessage            `json:"payload"`
	Inputs  map[string]json.RawMessage `json:"inputs"`
}

// execStdin returns the command's standard input. The rule: an explicit
// "stdin" in the payload wins (sent as is, even ""); otherwise a task with
// dependencies gets {"payload": <its payload>, "inputs": {name: result}}
// as one JSON document; otherwise the command gets no input.
func execStdin(p *execPayload, c Call) (io.Reader, error) {
	switch {
	case p.Stdin != nil:
		return strings.NewReader(*p.Stdin), nil
	case c.Inputs != nil:
		payload := json.RawMessage(c.Payload)
		if len(bytes.TrimSpace(payload)) == 0 {
			payload = json.RawMessage("null")
		}
		b, err := json.Marshal(execInputs{Payload: payload, Inputs: c.Inputs})
		if err != nil {
			return nil, Permanent(fmt.Errorf("exec: encoding inputs: %w", err))
		}
		return bytes.NewReader(append(b, '\n')), nil
	}
	return nil, nil
}

// execAttemptPrefix begins the name of each attempt's directory in the
// peer's directory of the exec dir: what the start removes there, and
// nothing else.
const execAttemptPrefix = "attempt-"

// ownDir makes dir a directory (0700) its owner, this process, may enter
// and write: one made by an earlier start, or by MkdirAll now, whose mode
// a task changed (chmod 000 .. in its attempt's directory) gets 0700
// back. A dir the owner can use keeps its mode.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st.Mode().Perm()&0o700 != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// ownDirs makes each of dirs usable (ownDir), in order: the exec dir,
// then the peer's directory in it (the same dir twice is made once).
func ownDirs(dirs ...string) error {
	for i, dir := range dirs {
		if i > 0 && dir == dirs[i-1] {
			continue
		}
		if err := ownDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// peerExecDir makes the peer's directory of the exec dir, and the exec
// dir, usable (ownDir): the peer's 0700 whatever it was.
func peerExecDir(root, dir string) error {
	if err := ownDirs(root, dir); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// sweepAttempts removes the attempt directories an earlier run of the
// peer left in dir, its own directory of the exec dir (it was killed
// before it could): nothing of this run is there yet, and no other
// peer's.
func sweepAttempts(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), execAttemptPrefix) {
			_ = removeAttemptDir(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// removeAttemptDir removes an attempt's directory and all it holds. A
// command may leave directories it cannot be written into (chmod 0500, a
// copied Go module cache): those are made writable (never through a
// symbolic link) and the removal is tried again.
func removeAttemptDir(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	// WalkDir calls the function on a directory before it reads it: made
	// readable here, it is read next. d is from Lstat: a link is no dir.
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// attemptDir makes an attempt's directory (0700) under the peer's
// directory of the exec dir. Both are given their mode back first when a
// task took their owner's access to them (chmod 000 .. or ../..), which
// would fail every attempt after it: two stats an attempt.
func (b *builtins) attemptDir() (string, error) {
	root, parent := b.execDirs()
	if parent == "" {
		return os.MkdirTemp(os.TempDir(), execAttemptPrefix)
	}
	if err := ownDirs(root, parent); err != nil {
		return "", fmt.Errorf("exec dir %s: %w", parent, err)
	}
	return os.MkdirTemp(parent, execAttemptPrefix)
}

// execHandler runs an allow-listed command and returns its exit code and
// output. The command's whole process group is killed when ctx is done.
// Its stdin is the payload's "stdin", else the task's inputs (execStdin).
// It runs in an empty directory of its own (BuiltinConfig.ExecDir), its
// TMPDIR too unless the task sets one, removed when the attempt ends.
func (b *builtins) execHandler(ctx context.Context, c Call) ([]byte, error) {
	var p execPayload
	if err := decodePayload("exec", c.Payload, &p); err != nil {
		return nil, err
	}
	argv, err := b.execArgv(&p)
	if err != nil {
		return nil, err
	}
	stdin, err := execStdin(&p, c)
	if err != nil {
		return nil, err
	}
	dir, err := b.attemptDir()
	if err != nil {
		return nil, fmt.Errorf("exec: %s: working directory: %w", p.Command, err)
	}
	// Deferred before cancel, so it runs after the child was killed and
	// waited for: nothing of the attempt writes there any more.
	defer func() {
		if err := removeAttemptDir(dir); err != nil {
			fmt.Fprintf(c.LogWriter(), "exec: %s: working directory not removed: %v\n", p.Command, err)
		}
	}()
	// runCtx is also canceled when output overflows, to stop the child.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	setProcessGroup(cmd)
	cmd.WaitDelay = execWaitDelay
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Env = b.execEnv(c, p.Env, dir)
	stdout := &capBuffer{limit: b.maxOutput, onOver: cancel}
	stderr := &capBuffer{limit: b.maxOutput, onOver: cancel}
	cmd.Stdout, cmd.Stderr = stdout, io.MultiWriter(stderr, c.LogWriter())
	runErr := cmd.Run()
	return b.execOutcome(ctx, p.Command, runErr, stdout, stderr)
}

// execOutcome turns a finished command into the handler's result or error.
func (b *builtins) execOutcome(ctx context.Context, name string, runErr error, stdout, stderr *capBuffer) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exec: %s: %w", name, err)
	}
	for _, s := range []struct {
		name string
		buf  *capBuffer
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if s.buf.over {
			return nil, Permanent(fmt.Errorf("exec: %s: %s exceeds %d bytes", name, s.name, b.maxOutput))
		}
	}
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		return nil, &ExecExitError{Command: name, Code: exitErr.ExitCode(), StderrTail: tail(stderr.buf.String(), execStderrTail)}
	}
	if runErr != nil {
		return nil, fmt.Errorf("exec: %s: %w", name, runErr)
	}
	return json.Marshal(execResult{Stdout: stdout.buf.String(), Stderr: stderr.buf.String()})
}

// tail returns the last <= n bytes of s, starting on a rune boundary and
// with surrounding white space trimmed.
func tail(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	return strings.TrimSpace(s)
}
