package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/needle-mesh/needle/cmd/internal/buildinfo"
	"github.com/needle-mesh/needle/cmd/internal/secret"
	"github.com/needle-mesh/needle/internal/flagnear"
	"github.com/needle-mesh/needle/internal/hugepages"
	"github.com/needle-mesh/needle/peer"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/handler"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/peer/webhook"
	"github.com/needle-mesh/needle/ring"
)

// ErrVersion is returned by ParseFlags for --version: print Version() and
// exit 0.
var ErrVersion = errors.New("version requested")

// Version is the line needled --version prints.
func Version() string { return "needled " + buildinfo.Get().String() }

// Main is the daemon: flags and environment -> peer.Config -> peer.Run.
// End-to-end tests reuse it.
type Main struct {
	Config    peer.Config
	LogFormat string
	LogLevel  string
	Stderr    io.Writer
	// Stdout takes --help's usage (nil: os.Stdout).
	Stdout io.Writer
	// SelfJoins are the --join addresses dropped as naming this peer
	// (--self-name); logged at start.
	SelfJoins []string
	// Environ lists the environment, for the NEEDLE_* names no flag reads
	// (UnknownEnv); nil is os.Environ.
	Environ func() []string
	// UnknownEnv are the NEEDLE_* variables set that nothing reads (a typo
	// of a flag's: NEEDLE_JION founds a mesh of its own); logged at start.
	UnknownEnv []string
	// Init is --init: create the data dir, print the peer id and exit
	// (RunInit) instead of running the peer.
	Init bool
	// HugePages is --huge-pages: main advises the heap for transparent
	// huge pages (package hugepages) and puts what it found in
	// HugePagesResult, which Run logs.
	HugePages       bool
	HugePagesResult *hugepages.Result
	// Hangup, when non-nil, delivers SIGHUP: each reloads the API token
	// file (ReloadTokens) while Run serves. main sets it before Run, so
	// that a SIGHUP is never the default's instant exit.
	Hangup <-chan os.Signal

	// tokenFile is --api-token-file: its tokens are Config.Tokens, read
	// again by ReloadTokens.
	tokenFile string
}

// NewMain returns a Main with the defaults of docs/api.md.
func NewMain() *Main {
	return &Main{Stderr: os.Stderr, LogFormat: "text", LogLevel: "info", HugePages: true}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// ParseFlags reads flags, falling back to NEEDLE_* environment variables.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	c := &m.Config
	fs := flag.NewFlagSet("needled", flag.ContinueOnError)
	// The flag package writes its own message and the whole usage on an
	// error: the caller prints the explained error instead, one line, and
	// --help prints the usage to standard output.
	fs.SetOutput(io.Discard)
	v := m.defineFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: needled [flags]\n\n"+
			"Every flag is also read from NEEDLE_<FLAG> (e.g. NEEDLE_DATA, NEEDLE_HTTP_ALLOW=a,b)\n"+
			"and from the --config file; the command line wins over the environment, which\n"+
			"wins over the file. The API token comes from NEEDLE_API_TOKEN or the file\n"+
			"--api-token-file (NEEDLE_API_TOKEN_FILE) names (one token a line, each with an\n"+
			"optional name= and scope=, re-read on SIGHUP). SIGHUP also re-reads --tls-cert,\n"+
			"--tls-key and --members (the peer ids allowed in the mesh).\n\n"+
			"Exit status: 0 stopped; 1 failed to start or to run; 2 a usage or\n"+
			"configuration error (a flag, variable or file as given), found before\n"+
			"anything is served.\n\n")
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(cmp.Or[io.Writer](m.Stdout, os.Stdout))
		fs.Usage()
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (see 'needled --help')", flagnear.Explain(fs, err))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (needled takes flags only: see 'needled --help')", fs.Arg(0))
	}
	if *v.version {
		return ErrVersion
	}
	m.Init = *v.init
	set := envFallback(fs, getenv)
	if set.err != nil {
		return set.err
	}
	environ := m.Environ
	if environ == nil {
		environ = os.Environ
	}
	m.UnknownEnv = unknownEnv(fs, environ())
	if err := labelsEnv(fs, set.names, getenv); err != nil {
		return err
	}
	if *v.config != "" {
		if err := configFile(fs, *v.config, set.names); err != nil {
			return err
		}
	}
	if *v.init != m.Init {
		return errors.New("--init is a command, read from the command line only (not NEEDLE_INIT or --config)")
	}
	if err := checkPositive(fs); err != nil {
		return err
	}
	switch *v.handlers {
	case "open":
	case "strict":
		c.StrictHandlers = true
	default:
		return fmt.Errorf("--handlers %q: want open or strict", *v.handlers)
	}
	if c.WorkerTTL <= 0 {
		return fmt.Errorf("--worker-ttl %v: want a positive duration", c.WorkerTTL)
	}
	switch {
	case c.WorkerCrashLimit < 0:
		return fmt.Errorf("--worker-crash-limit %d: want 0 (no limit) or more", c.WorkerCrashLimit)
	case c.WorkerCrashLimit == 0:
		c.WorkerCrashLimit = -1 // peer.Config: negative is no limit, 0 the default
	}
	if err := m.apiTokens(getenv("NEEDLE_API_TOKEN"), *v.tokenFile); err != nil {
		return err
	}
	if f := c.MembersFile; f != "" {
		// Read now, as the token file is: a bad line stops the start
		// before the data dir is opened, naming the file and the line.
		if _, err := p2p.LoadMembers(f); err != nil {
			return fmt.Errorf("--members: %w", err)
		}
	}
	if f := c.SwarmKeyFile; f != "" {
		// Likewise: a missing or malformed key is a usage error (exit 2).
		if _, err := p2p.LoadSwarmKey(f); err != nil {
			return fmt.Errorf("--swarm-key: %w", err)
		}
	}
	build := buildinfo.Get()
	c.Version, c.Commit = build.Version, build.Commit
	c.Listen, c.NoSteal = v.listen, !*v.steal
	c.Join, m.SelfJoins = withoutSelf(v.join, *v.selfName)
	c.Initial = v.initialPeers
	c.Notify.Allow = v.notifyAllow
	c.Builtins.ExecEnv = v.execEnv
	if len(v.labels) > 0 {
		c.Labels = v.labels
	}
	return m.builtins(v.execAllow, v.httpAllow)
}

// apiTokens sets the API token: NEEDLE_API_TOKEN's value (one admin
// token), or the tokens in the file --api-token-file names (a compose
// secret or a Kubernetes Secret mounted as a file), but not both. The file
// may hold several tokens, one a line, each with a name and scopes
// (api.ParseTokens); all are accepted: a rotation adds the new token to
// every peer's file, moves the clients to it, then removes the old one. A
// line the file cannot hold stops the daemon, the error naming the file
// and the line.
func (m *Main) apiTokens(env, file string) error {
	switch {
	case file == "" && strings.ContainsFunc(env, unicode.IsSpace):
		// Not echoed: the value is a secret. A line of a token file
		// ("TOKEN name=ci scope=read") here would be one admin token,
		// spaces included.
		return errors.New("NEEDLE_API_TOKEN holds white space: it takes one token alone (admin); names and scopes go in --api-token-file (NEEDLE_API_TOKEN_FILE)")
	case file == "":
		m.Config.Token = env
		return nil
	case env != "":
		return errors.New("NEEDLE_API_TOKEN and --api-token-file (NEEDLE_API_TOKEN_FILE) are both set: set one")
	}
	tokens, err := readTokens(file)
	if err != nil {
		return fmt.Errorf("--api-token-file: %w", err)
	}
	m.tokenFile, m.Config.Tokens = file, api.NewTokenSet(tokens)
	return nil
}

// readTokens reads and parses a token file. Its errors name the file and
// the line, never a token.
func readTokens(file string) ([]api.Token, error) {
	text, err := secret.ReadText(file)
	if err != nil {
		return nil, err
	}
	tokens, err := api.ParseTokens(text)
	switch {
	case errors.Is(err, api.ErrNoToken):
		return nil, fmt.Errorf("%s: %w", file, secret.ErrEmpty)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return tokens, nil
}

// ReloadTokens reads --api-token-file again and makes its tokens the ones
// the API accepts (SIGHUP), so that a rotation needs no restart. On an
// error (a file that cannot be read, holds no token, or a line it cannot
// hold) the tokens accepted stay as they were, all of them: a half-written
// file must not lock every client out, nor half of them. Without a token
// file there is nothing to reload. The log names the tokens, never shows
// one.
func (m *Main) ReloadTokens(log *slog.Logger) {
	if m.tokenFile == "" {
		return
	}
	tokens, err := readTokens(m.tokenFile)
	if err != nil {
		log.Error("SIGHUP: API tokens not reloaded; the ones accepted stay", "err", err,
			"tokens", m.Config.Tokens.Len())
		return
	}
	m.Config.Tokens.SetTokens(tokens)
	log.Info("SIGHUP: API tokens reloaded", "file", m.tokenFile, "tokens", len(tokens),
		"names", strings.Join(m.Config.Tokens.Names(), ","))
	warnTokenFileMode(log, m.tokenFile)
}

// warnTokenFileMode logs a WARN when the token file can be read by users
// other than its owner (it holds the mesh's admin tokens), as ssh does of
// a private key. A file reached through a symbolic link, as a Kubernetes
// Secret's files are, may be group-readable: the group is the pod's
// fsGroup, and the Secret's defaultMode sets the mode.
func warnTokenFileMode(log *slog.Logger, file string) {
	lst, err := os.Lstat(file)
	if err != nil {
		return
	}
	st, err := os.Stat(file)
	if err != nil {
		return
	}
	mask := fs.FileMode(0o077)
	if lst.Mode()&fs.ModeSymlink != 0 {
		mask = 0o007
	}
	if st.Mode().Perm()&mask != 0 {
		log.Warn("API token file is readable by others: it holds the mesh's API tokens; chmod 600 it",
			"file", file, "mode", fmt.Sprintf("%04o", st.Mode().Perm()))
	}
}

// warnTokens logs at start what is weak in the API's tokens: a short
// NEEDLE_API_TOKEN (a token file refuses one), a token file others can
// read.
func (m *Main) warnTokens(log *slog.Logger) {
	if t := m.Config.Token; t != "" && len(t) < api.MinTokenLen {
		log.Warn(fmt.Sprintf("NEEDLE_API_TOKEN is shorter than %d bytes: it can be guessed; make one with needle keygen --token-file FILE, or openssl rand -hex 32", api.MinTokenLen),
			"bytes", len(t))
	}
	if m.tokenFile != "" {
		warnTokenFileMode(log, m.tokenFile)
	}
}

// tlsReloader reloads the API's TLS certificate (peer.Peer.ReloadTLS).
type tlsReloader interface {
	ReloadTLS() (ok bool, notAfter time.Time, err error)
}

// serveHangups reloads the tokens and the TLS certificate (tls may be nil)
// at each SIGHUP until ctx ends.
func (m *Main) serveHangups(ctx context.Context, log *slog.Logger, tls tlsReloader) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Hangup:
			m.hangup(log, tls)
		}
	}
}

// membersReloader reloads the members file (peer.Peer.ReloadMembers).
type membersReloader interface {
	ReloadMembers() (ok bool, listed, disconnected int, err error)
}

// hangup reloads what a SIGHUP reloads: the API tokens of --api-token-file,
// the certificate of --tls-cert and, when tls is the peer, the list of
// --members. On an error each keeps what it had.
func (m *Main) hangup(log *slog.Logger, tls tlsReloader) {
	m.ReloadTokens(log)
	members := false
	if mr, ok := tls.(membersReloader); ok {
		members = m.reloadMembers(log, mr)
	}
	served := false
	if tls != nil {
		ok, notAfter, err := tls.ReloadTLS()
		switch {
		case err != nil:
			log.Error("SIGHUP: TLS certificate not reloaded; the one served stays", "err", err)
			served = true
		case ok:
			log.Info("SIGHUP: TLS certificate reloaded", "file", m.Config.TLSCert, "not_after", notAfter.UTC().Format(time.RFC3339))
			served = true
		}
	}
	if m.tokenFile == "" && !served && !members {
		log.Info("SIGHUP: nothing to reload (no --api-token-file, no --tls-cert, no --members)")
	}
}

// reloadMembers reloads --members (SIGHUP) and reports whether there is
// one. A file that fails to parse keeps the list as it was: never a crash,
// never a mesh opened to every holder of the swarm key.
func (m *Main) reloadMembers(log *slog.Logger, mr membersReloader) bool {
	ok, listed, disconnected, err := mr.ReloadMembers()
	switch {
	case err != nil:
		log.Error("SIGHUP: --members not reloaded; the list stays as it was", "file", m.Config.MembersFile, "err", err)
	case ok:
		log.Info("SIGHUP: --members reloaded", "file", m.Config.MembersFile, "peers", listed, "disconnected", disconnected)
	}
	return err != nil || ok
}

// positiveFlags are the flags whose zero or negative value means nothing:
// the peer's Config reads such a value as "the default", so --retention 0
// (meant as "keep nothing") kept finished groups 7 days. Given, they are
// an error naming the default.
var positiveFlags = []string{"partitions", "replicas", "retention", "default-timeout", "max-body", "max-payload",
	"max-tasks", "min-every", "max-fired-per-minute", "forget-after", "max-conns", "max-conns-per-client", "notify-timeout", "notify-concurrency"}

// checkPositive refuses a zero or negative value of positiveFlags,
// wherever it came from (command line, environment, --config).
func checkPositive(fs *flag.FlagSet) error {
	for _, name := range positiveFlags {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		var bad bool
		switch v := f.Value.(flag.Getter).Get().(type) {
		case int:
			bad = v <= 0
		case int64:
			bad = v <= 0
		case time.Duration:
			bad = v <= 0
		}
		if bad {
			return fmt.Errorf("--%s %s: want a positive value (the default is %s)", name, f.Value, f.DefValue)
		}
	}
	return nil
}

type flagsSet struct {
	names map[string]bool // flags given on the command line or in the environment
	err   error
}

// envFallback sets every flag not given on the command line from its
// NEEDLE_* variable, and returns the flags set either way.
func envFallback(fs *flag.FlagSet, getenv func(string) string) flagsSet {
	set := flagsSet{names: map[string]bool{}}
	fs.Visit(func(f *flag.Flag) { set.names[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if set.names[f.Name] || set.err != nil {
			return
		}
		name := "NEEDLE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v := getenv(name)
		if v == "" {
			return
		}
		set.names[f.Name] = true
		for _, part := range splitList(f, v) {
			if e := f.Value.Set(part); e != nil {
				set.err = fmt.Errorf("%s=%q: %v", name, v, flagnear.ExplainValue(f, e))
			}
		}
	})
	return set
}

// otherNeedleEnv are the NEEDLE_* variables read by something other than
// a flag of needled: the API token, the CLI's in the same environment (the
// image), the webhook secret, the labels' plural, the variables exec tasks
// and the Compose file set, the tests'.
var otherNeedleEnv = map[string]bool{"NEEDLE_API_TOKEN": true, "NEEDLE_ADDR": true, "NEEDLE_CACERT": true,
	"NEEDLE_NOTIFY_SECRET": true, "NEEDLE_LABELS": true, "NEEDLE_INIT": true, "NEEDLE_URL": true, "NEEDLE_TOKEN": true,
	"NEEDLE_TASK_ID": true, "NEEDLE_GROUP_ID": true, "NEEDLE_ATTEMPT": true, "NEEDLE_ROUND": true,
	"NEEDLE_SHARD": true, "NEEDLE_SHARDS": true, "NEEDLE_PORT": true, "NEEDLE_IMAGE": true, "NEEDLE_HOSTILE": true}

// unknownEnv returns the NEEDLE_* names in environ that no flag of fs and
// nothing else reads, sorted: a mistyped flag variable is ignored, where
// a mistyped --config key is an error, so at least it is said.
func unknownEnv(fs *flag.FlagSet, environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "NEEDLE_") || otherNeedleEnv[name] ||
			strings.HasPrefix(name, "NEEDLE_BENCH_") || strings.HasPrefix(name, "NEEDLE_E2E_") {
			continue
		}
		flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "NEEDLE_"), "_", "-"))
		if fs.Lookup(flagName) == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// configFile sets the flags not set yet from a file of "flag = value" lines.
func configFile(fs *flag.FlagSet, path string, set map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), "--")), strings.TrimSpace(value)
		f := fs.Lookup(name)
		switch {
		case !ok:
			return fmt.Errorf("%s:%d: want \"flag = value\", got %q", path, i+1, line)
		case f == nil || name == "config":
			return fmt.Errorf("%s:%d: unknown flag %q", path, i+1, name)
		case set[name]:
			continue // the command line or the environment wins
		}
		if err := f.Value.Set(value); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, i+1, name, flagnear.ExplainValue(f, err))
		}
	}
	return nil
}

// splitList splits a repeatable flag's environment value on commas.
func splitList(f *flag.Flag, v string) []string {
	if _, ok := f.Value.(*listFlag); ok {
		return strings.Split(v, ",")
	}
	return []string{v}
}

func (m *Main) builtins(execAllow, httpAllow []string) error {
	b := &m.Config.Builtins
	b.HTTPAllow = httpAllow
	for _, e := range execAllow {
		name, path, ok := strings.Cut(e, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("--exec-allow %q: want NAME=/path/to/program", e)
		}
		if b.Exec == nil {
			b.Exec = map[string][]string{}
		}
		b.Exec[name] = strings.Fields(path)
	}
	return nil
}

// prepare sets the peer's logger and makes its data dir absolute, for Run
// and RunInit.
func (m *Main) prepare() (*slog.Logger, error) {
	log, err := m.logger()
	if err != nil {
		return nil, err
	}
	m.Config.Logger = log
	if abs, err := filepath.Abs(m.Config.DataDir); err == nil {
		m.Config.DataDir = abs
	}
	if m.Config.Builtins.ExecDir == "" {
		m.Config.Builtins.ExecDir = filepath.Join(m.Config.DataDir, "exec")
	} else if abs, err := filepath.Abs(m.Config.Builtins.ExecDir); err == nil {
		m.Config.Builtins.ExecDir = abs
	}
	return log, nil
}

// usageError is an error of the configuration as given (a flag, a
// NEEDLE_* or OTEL_* variable, the --config file, a file a flag names)
// found after ParseFlags: it is peer.ErrConfig, and needled exits 2 on it
// as on a flag it cannot parse (ExitCode).
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == peer.ErrConfig }

// ExitCode is needled's exit status for err, an error of Run or RunInit:
// 2 for a usage or configuration error (peer.ErrConfig), as for every
// error of ParseFlags, and 1 for a failure to start or to run (the data
// dir, a port, the mesh).
func ExitCode(err error) int {
	if errors.Is(err, peer.ErrConfig) {
		return 2
	}
	return 1
}

// Run starts the peer and serves until ctx is canceled.
func (m *Main) Run(ctx context.Context) error {
	log, err := m.prepare()
	if err != nil {
		return usageError{err}
	}
	if r := m.HugePagesResult; r != nil {
		log.Info("memory: "+r.String(), "transparent_huge_pages", r.Mode)
	}
	for _, j := range m.SelfJoins {
		log.Info("join address names this peer (--self-name); skipped", "join", j)
	}
	if len(m.UnknownEnv) > 0 {
		log.Warn("environment variables no flag reads, ignored: a typo of a flag's NEEDLE_<FLAG>? (needled --help)",
			"names", strings.Join(m.UnknownEnv, ","))
	}
	if len(m.SelfJoins) > 0 && len(m.Config.Join) == 0 && len(m.Config.Initial) == 0 {
		log.Info("every join address names this peer: it founds the mesh unless its data dir already holds one")
	}
	tp, err := tracerProvider(ctx, os.Getenv)
	if err != nil {
		return usageError{err}
	}
	if tp != nil {
		m.Config.TracerProvider = tp
		defer func() {
			// Export what the batcher holds; bounded, as a stop must be.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				log.Warn("tracing: spans not exported at exit", "err", err)
			}
		}()
		log.Info("tracing: spans exported over OTLP/HTTP (OTEL_* environment)")
	}
	// The adapters are built here, the one place that knows them all,
	// and handed to the runtime.
	if err := m.Config.Builtins.Validate(); err != nil {
		return usageError{err}
	}
	// Past Validate, an error is of the host (a command --exec names not
	// found, the exec dir's owner): a failure to start.
	if m.Config.Handlers, err = handler.NewBuiltins(m.Config.Builtins); err != nil {
		return err
	}
	if m.Config.Webhooks, err = webhook.New(m.Config.Notify); err != nil {
		return usageError{err}
	}
	// The API's and the health listener's addresses are taken before the
	// data dir is: a port in use (another peer, a typo) fails the start
	// with nothing created there, and one that is no address is an error
	// of the configuration (exit 2), as Validate would find.
	closeListeners := func() {
		for _, ln := range []net.Listener{m.Config.Runtime.Listener, m.Config.Runtime.HealthListener} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	for _, l := range []struct {
		flag, addr string
		ln         *net.Listener
	}{{"--http", m.Config.HTTPAddr, &m.Config.Runtime.Listener}, {"--health-listen", m.Config.HealthAddr, &m.Config.Runtime.HealthListener}} {
		if *l.ln != nil || l.addr == "" {
			continue
		}
		if err := peer.CheckListenAddr(l.flag, l.addr); err != nil {
			closeListeners()
			return usageError{err}
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			closeListeners()
			return fmt.Errorf("peer: listen on %s (%s): %w", l.addr, l.flag, err)
		}
		*l.ln = ln
	}
	p, err := peer.New(m.Config)
	if err != nil {
		closeListeners()
		return err
	}
	prefaultHeap(m.HugePagesResult, log) // after the WAL is open: hugepages.Prefault
	if m.Config.Token == "" && m.Config.Tokens == nil {
		log.Warn("no NEEDLE_API_TOKEN set: the API accepts every request, from every user of this host too")
	}
	m.warnTokens(log)
	if m.Hangup != nil {
		go m.serveHangups(ctx, log, p)
	}
	return p.Run(ctx)
}

// prefaultHeap faults in hugepages.DefaultPrefault bytes of heap when the
// heap is on huge pages (r is what hugepages.Enable found; nil when it did
// not run), and reports whether it did. Call it once the WAL is open, so
// that Badger's memtable arena is placed already.
func prefaultHeap(r *hugepages.Result, log *slog.Logger) bool {
	if r == nil || !(r.Advised || r.Mode == "always") {
		return false
	}
	free := hugepages.Prefault(hugepages.DefaultPrefault)
	log.Info("memory: heap faulted in ahead", "bytes", hugepages.DefaultPrefault, "heap_free_bytes", free)
	return true
}

// fatal reports the error that stops the daemon on Stderr: a line of
// text, or with --log-format json an ERROR record like the log's, so that
// a collector that parses the log reads it too.
func (m *Main) fatal(err error) {
	if m.LogFormat == "json" {
		slog.New(slog.NewJSONHandler(m.Stderr, nil)).Error("needled stopped", "err", err.Error())
		return
	}
	fmt.Fprintln(m.Stderr, "needled:", err)
}

func (m *Main) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(m.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %v", m.LogLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch m.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(m.Stderr, opts)), nil
	case "json":
		opts.ReplaceAttr = durationText
		return slog.New(slog.NewJSONHandler(m.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", m.LogFormat)
}

// durationText writes a duration in a JSON record as the text format
// does ("took":"3.224s"): slog's JSON handler wrote nanoseconds
// ("took":3224000000, a drain's "timeout":20000000000), which a reader of
// the log had to count the digits of.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// flagVars holds the flags that are not fields of Config, for ParseFlags
// to apply once the environment and the config file are read.
type flagVars struct {
	listen, join, initialPeers, notifyAllow, execAllow, execEnv, httpAllow listFlag
	labels                                                                 labelFlag
	selfName, tokenFile, handlers, config                                  *string
	steal, version, init                                                   *bool
}

// defineFlags defines every flag of needled on fs.
func (m *Main) defineFlags(fs *flag.FlagSet) *flagVars {
	v := &flagVars{labels: labelFlag{}}
	m.defineLimitFlags(fs)
	m.defineMeshFlags(fs, v)
	m.defineTaskFlags(fs, v)
	return v
}

// defineLimitFlags defines the flags of storage, tasks' defaults and limits.
func (m *Main) defineLimitFlags(fs *flag.FlagSet) {
	c := &m.Config
	fs.StringVar(&c.DataDir, "data", "./needle-data", "data dir: WAL, identity, outbox")
	fs.StringVar(&c.HTTPAddr, "http", "127.0.0.1:7070", "HTTP API listen address")
	fs.IntVar(&c.Slots, "slots", 0, "tasks this peer runs at once (default NumCPU+1)")
	fs.IntVar(&c.Partitions, "partitions", 256, "ring partitions; fixed when the data dir is first created")
	fs.DurationVar(&c.Retention, "retention", 7*24*time.Hour, "how long finished groups are kept")
	fs.DurationVar(&c.DefaultTimeout, "default-timeout", 10*time.Minute, "per-attempt timeout of tasks that set none")
	fs.Int64Var(&c.Limits.MaxBody, "max-body", 32<<20, "largest request body, bytes")
	fs.IntVar(&c.Limits.MaxPayload, "max-payload", 1<<20, "largest task payload, bytes")
	fs.IntVar(&c.Limits.MaxTasks, "max-tasks", 100_000, "most tasks in one group")
	fs.IntVar(&c.MaxResult, "max-result", peer.DefaultMaxResult, "largest task result, bytes; a larger one fails the task (never truncated)")
	fs.IntVar(&c.MaxLog, "max-log", peer.DefaultMaxLog, "task log kept per attempt, bytes; past it the head is cut (the tail kept, the cut counted)")
	fs.Int64Var(&c.MinFreeDisk, "min-free-disk", peer.DefaultMinFreeDisk, "bytes to keep free under the data dir: below, submissions of groups this peer owns are refused (507 insufficient_storage) while the work taken runs on; at most a quarter of the filesystem; negative: no check")
	fs.Int64Var(&c.MaxHeap, "max-heap", 0, "live heap in bytes over which submissions of groups this peer owns are refused (507 insufficient_storage) while the work taken runs on; 0: half the memory the process may use (machine, cgroup or GOMEMLIMIT); negative: no check")
	fs.DurationVar(&c.Limits.MinEvery, "min-every", time.Second, "shortest interval between two ticks of a schedule (every, cron, @every)")
	fs.BoolVar(&m.HugePages, "huge-pages", m.HugePages, "ask Linux for transparent huge pages for the heap where it gives them on request (enabled = madvise): a busy peer's heap grows by 2 MiB pages instead of 4 KiB page faults (docs/decisions.md)")
	fs.IntVar(&c.Limits.MaxFiredPerMinute, "max-fired-per-minute", 100_000, "most tasks one schedule may fire in a minute (tasks per firing x ticks per minute)")
}

// defineMeshFlags defines the flags of the mesh, the API and its access.
func (m *Main) defineMeshFlags(fs *flag.FlagSet, v *flagVars) {
	c := &m.Config
	fs.Var(&v.listen, "listen", "libp2p listen multiaddr (repeatable; default TCP and QUIC on port 4001, all interfaces with --swarm-key or --members, else 127.0.0.1)")
	fs.Var(&v.join, "join", "peer to join through: a multiaddr ending in /p2p/<id>, or a TCP address without the id (/dns4/needle-0/tcp/4001, needle-0:4001) (repeatable)")
	fs.Var(&v.initialPeers, "initial-peers", "a peer of a new mesh started together: a multiaddr ending in /p2p/<id> (needled --init prints the id) (repeatable). "+
		"The peers listed found a new mesh on exactly these peers: list every one, this peer too, and start every one with the same list, --partitions, --replicas and --placement. "+
		"Read only at the first start, while the data dir holds and held no partition (it may stay in the config); a peer not listed joins through the listed ones")
	v.selfName = fs.String("self-name", "", "this peer's own DNS name (a pod name): --join addresses naming it (NAME or NAME.<domain>) are skipped, so peers sharing one --join list found the mesh on the peer it names")
	fs.StringVar(&c.SwarmKeyFile, "swarm-key", "", "private-network key file (needle keygen); peers without it cannot connect")
	fs.StringVar(&c.MembersFile, "members", "", "file of the peer ids allowed in the mesh, one a line with an optional name after it (12D3KooW... web-3; # comments; needled --init prints a peer's id): "+
		"connections to and from any other id are refused, and gossip it authored is dropped, even from a peer that holds the swarm key; list every peer on every peer. "+
		"Read again on SIGHUP: a peer removed is disconnected at once; a bad line stops the start, and on SIGHUP keeps the list (env NEEDLE_MEMBERS)")
	fs.BoolVar(&c.MDNS, "mdns", false, "discover peers on the LAN with mDNS")
	fs.IntVar(&c.Replicas, "replicas", 3, "Raft replicas of each partition (fewer while the mesh is smaller)")
	fs.Func("placement", "replicas after a partition's primary: spread (evens leadership at hundreds of peers) or circle; the same on every peer, recorded in the data dir when it is created. Default: the recorded one; spread for a new data dir; circle for one an earlier release created", func(s string) (err error) {
		c.Placement, err = ring.ParsePlacement(s)
		c.PlacementSet = err == nil
		return err
	})
	fs.DurationVar(&c.ForgetAfter, "forget-after", 10*time.Minute, "a peer dead this long leaves the membership and its replicas move")
	v.steal = fs.Bool("steal", true, "take part in work stealing")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve the API over HTTPS with this certificate (PEM; with --tls-key; both re-read on SIGHUP)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	v.tokenFile = fs.String("api-token-file", "", "file holding the API tokens, one a line, any of them accepted: TOKEN [name=NAME] [scope=S[,S...]] [handlers=H[,H...]], S one of read, submit, worker, admin; a bare TOKEN is admin; handlers= (names, or prefixes ending in *) limits a submit or worker token to those handlers (what it polls for, creates, retries, cancels and schedules; never what it reads); a TOKEN is at least 16 bytes (needle keygen --token-file writes one) (# comments; a mounted secret; env NEEDLE_API_TOKEN_FILE; see docs/operations.md): instead of NEEDLE_API_TOKEN. Read again on SIGHUP; a bad line stops the start, and on SIGHUP keeps the tokens accepted")
	fs.BoolVar(&c.OpenMesh, "insecure-open-mesh", false, "allow --listen, --join or --initial-peers beyond this host without --swarm-key or --members: any host that reaches the mesh may join it, read its tasks and run them")
	fs.BoolVar(&c.OpenAPI, "insecure-open-api", false, "allow --http on a non-loopback address without NEEDLE_API_TOKEN: anyone who reaches it may use the API")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM or needle drain: hand work over for at most this long, then exit (negative: exit at once)")
	fs.StringVar(&c.HealthAddr, "health-listen", "", "ADDR of a second HTTP listener serving only GET /healthz and GET /metrics, without the token, over plain HTTP and with a few connections of its own: health checks that a full --max-conns cannot block (default off)")
	fs.IntVar(&c.MaxConns, "max-conns", 1024, "most open API connections; more wait until one closes")
	fs.IntVar(&c.MaxConnsPerClient, "max-conns-per-client", peer.DefaultMaxConnsPerClient, "most open API connections from one client address; one more is closed at once, without taking a --max-conns slot (half of it bounds the client's long polls: 429 beyond); behind a proxy, raise it to what the proxy may open")
	fs.Float64Var(&c.RatePerClient, "rate", 0, "API requests per second per client address, 429 beyond (0 = no limit)")
}

// defineTaskFlags defines the flags of webhooks, built-ins, workers, logs
// and the config file.
func (m *Main) defineTaskFlags(fs *flag.FlagSet, v *flagVars) {
	c := &m.Config
	fs.Var(&v.notifyAllow, "notify-allow", "URL prefix webhook (\"notify\") URLs must be under (repeatable; none: notify is refused)")
	fs.StringVar(&c.Notify.Secret, "notify-secret", "", "key signing every webhook, Standard Webhooks (webhook-signature; whsec_<base64> or a plain string); required with --notify-allow (prefer NEEDLE_NOTIFY_SECRET or --config: argv is visible)")
	fs.DurationVar(&c.Notify.Timeout, "notify-timeout", 10*time.Second, "timeout of one webhook call")
	fs.IntVar(&c.Notify.Concurrency, "notify-concurrency", 16, "webhook calls in flight on this peer")
	fs.Var(&v.execAllow, "exec-allow", "NAME=/path/to/program: a command exec tasks may run (repeatable)")
	fs.Var(&v.execEnv, "exec-env", "environment variable NAME exec tasks may set in their payload's env; the daemon's own value is passed when a task sets none (repeatable; default none)")
	fs.StringVar(&c.Builtins.ExecDir, "exec-dir", "", "directory under which each exec attempt runs in an empty directory of its own (0700; its TMPDIR too unless the task sets one), removed with its contents when the attempt ends; each peer's in a directory named by its peer id (DIR/<peer id>), so peers may share DIR; created at start when --exec-allow names a command, and the attempt directories a killed run of this peer left in its directory removed (default DATA/exec)")
	fs.Var(&v.httpAllow, "http-allow", "URL prefix http tasks may POST to (repeatable)")
	fs.DurationVar(&c.WorkerTTL, "worker-ttl", peer.DefaultWorkerTTL, "an external worker silent this long (no poll, heartbeat or report) is dead: its tasks run again")
	fs.IntVar(&c.WorkerCrashLimit, "worker-crash-limit", peer.DefaultWorkerCrashLimit, "a task fails for good once this many external workers in a row died running it alone (a dead worker's tasks run again one to a worker); 0: no limit")
	v.handlers = fs.String("handlers", "open", "open: a handler this peer has not registered is external (served by workers polling POST /v1/workers/poll); strict: refuse it (400 unknown handler)")
	fs.Var(v.labels, "label", "placement label key=value of this peer (repeatable; env NEEDLE_LABELS=zone=a,gpu=true)")
	fs.StringVar(&m.LogFormat, "log-format", m.LogFormat, "log format: text or json")
	fs.StringVar(&m.LogLevel, "log-level", m.LogLevel, "log level: debug, info, warn, error")
	v.version = fs.Bool("version", false, "print the version and exit")
	v.init = fs.Bool("init", false, "create the data dir as a first start would (honouring --data, --partitions, --placement), print this peer's id and the multiaddrs it would listen on (--listen), and exit without starting; on an existing data dir print its id and change nothing. Command line only")
	v.config = fs.String("config", "", "config file: one \"flag = value\" per line (# comments; repeat a line for a repeatable flag)")
}
