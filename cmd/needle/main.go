// Command needle is the CLI client of a needle mesh: it submits tasks and
// groups to any peer's HTTP API and inspects, waits for and cancels them.
//
// Exit codes: 0 success, 1 failure (including a task or group that did not
// succeed), 2 usage error.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/needle-mesh/needle/bench"
	"github.com/needle-mesh/needle/cmd/internal/buildinfo"
	"github.com/needle-mesh/needle/cmd/internal/secret"
	"github.com/needle-mesh/needle/internal/flagnear"
	"github.com/needle-mesh/needle/peer/api"
)

// Command is one subcommand: `needle <name> [flags] [args]`.
type Command interface {
	// Run runs the command with the arguments after its name.
	Run(ctx context.Context, args []string) error
	// Usage returns the command's help text.
	Usage() string
}

// commands is the dispatch table. To add a command, add its file
// (`bench.go` with BenchCommand) and one line here.
var commands = map[string]func(g *Globals) Command{
	"submit":   func(g *Globals) Command { return &SubmitCommand{Globals: g} },
	"get":      func(g *Globals) Command { return &GetCommand{Globals: g} },
	"wait":     func(g *Globals) Command { return &WaitCommand{Globals: g} },
	"cancel":   func(g *Globals) Command { return &CancelCommand{Globals: g} },
	"events":   func(g *Globals) Command { return &EventsCommand{Globals: g} },
	"bench":    func(*Globals) Command { return BenchCommand{} },
	"peers":    func(g *Globals) Command { return &PeersCommand{Globals: g} },
	"forget":   func(g *Globals) Command { return &ForgetCommand{Globals: g} },
	"keygen":   func(g *Globals) Command { return &KeygenCommand{Globals: g} },
	"health":   func(g *Globals) Command { return &HealthCommand{Globals: g} },
	"version":  func(g *Globals) Command { return &VersionCommand{Globals: g} },
	"simulate": func(*Globals) Command { return SimulateCommand{} },
	"schedule": func(g *Globals) Command { return &ScheduleCommand{Globals: g} },
	"drain":    func(g *Globals) Command { return &DrainCommand{Globals: g} },
	"list":     func(g *Globals) Command { return &ListCommand{Globals: g} },
	"stats":    func(g *Globals) Command { return &StatsCommand{Globals: g} },
	"retry":    func(g *Globals) Command { return &RetryCommand{Globals: g} },
	"audit":    func(g *Globals) Command { return &AuditCommand{Globals: g} },
	"logs":     func(g *Globals) Command { return &LogsCommand{Globals: g} },
	"hostile":  func(*Globals) Command { return HostileCommand{} },
	"workers":  func(g *Globals) Command { return &WorkersCommand{Globals: g} },
}

// summaries are the one-line descriptions `needle --help` lists. A command
// without one is listed with the first line of its Usage's description.
var summaries = map[string]string{
	"submit":   "submit a task or a group (from flags or a JSON file)",
	"get":      "show a task or a group",
	"version":  "print this CLI's version and its peer's",
	"wait":     "wait for a task or a group to finish, with live progress",
	"cancel":   "cancel a task, or every unfinished task of a group",
	"events":   "print a task's history",
	"bench":    "run the benchmark workloads on real peers on loopback",
	"peers":    "list the peers of the mesh, their state, load and labels",
	"forget":   "remove a dead peer from the mesh for good",
	"keygen":   "write a swarm key for a private mesh",
	"simulate": "run the deterministic simulator on a seed (or many)",
	"schedule": "add, list, pause, resume, trigger or remove schedules",
	"drain":    "hand a peer's work over to the others and stop it",
	"health":   "exit 0 when the peer serves, 1 when it does not (for probes)",
	"list":     "list or search the tasks (or groups) of the whole mesh, newest first",
	"stats":    "count the mesh's tasks per handler and state",
	"retry":    "run a FAILED or CANCELED task, or a group's, again",
	"audit":    "print who canceled, retried or changed what",
	"logs":     "print or follow (-f) what a task's handler logged",
	"hostile":  "attack a mesh on loopback with hostile requests and wire messages, and check it held",
	"workers":  "list the external workers of the mesh: handlers, peer, running, last seen",
}

// Globals are the settings and streams every command shares.
type Globals struct {
	Addr      string    // API base URL; --addr, env NEEDLE_ADDR
	Token     string    // bearer token; --token, env NEEDLE_API_TOKEN or the file NEEDLE_API_TOKEN_FILE names
	CACert    string    // PEM file of the CA that signed the peers' certificate; --cacert, env NEEDLE_CACERT
	Stdin     io.Reader // read by `submit -f -`
	Stdout    io.Writer // results
	Stderr    io.Writer // progress and diagnostics
	StderrTTY bool      // Stderr is a terminal: draw a live progress bar
	// Traceparent is the W3C trace context submissions join (submit
	// --traceparent); env TRACEPARENT, as exec hands it to a task's child.
	Traceparent string
}

// DefaultAddr is the API address used without --addr and NEEDLE_ADDR.
const DefaultAddr = "http://127.0.0.1:7070"

func main() {
	token, err := secret.FromEnv("NEEDLE_API_TOKEN", os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "needle:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// `needle bench` runs this binary as its Go worker processes (w1go).
	if served, err := bench.ServeWorkerFromEnv(ctx); served {
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "needle: bench worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	g := &Globals{
		Addr:      envOr("NEEDLE_ADDR", DefaultAddr),
		CACert:    os.Getenv("NEEDLE_CACERT"),
		Token:     token,
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		StderrTTY: isTerminal(os.Stderr),

		Traceparent: os.Getenv("TRACEPARENT"),
	}
	code := run(ctx, g, os.Args[1:])
	stop()
	os.Exit(code)
}

func envOr(name, dflt string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return dflt
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// run runs the command line args (without the program name) and returns
// the exit code.
func run(ctx context.Context, g *Globals, args []string) int {
	fs := g.flagSet("needle")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(g.Stdout, mainUsage())
			return 0
		}
		fmt.Fprintf(g.Stderr, "needle: %v\n%s", flagnear.Explain(fs, err), mainUsage())
		return 2
	}
	rest := fs.Args()
	if *version {
		fmt.Fprintln(g.Stdout, "needle", buildinfo.Get())
		return 0
	}
	if len(rest) == 0 {
		fmt.Fprint(g.Stderr, mainUsage())
		return 2
	}
	name := rest[0]
	if name == "help" {
		return help(g, rest[1:])
	}
	newCmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(g.Stderr, "needle: unknown command %q\n%s", name, mainUsage())
		return 2
	}
	cmd := newCmd(g)
	return exitCode(g, name, cmd, cmd.Run(ctx, rest[1:]))
}

func help(g *Globals, args []string) int {
	if len(args) == 1 {
		if newCmd, ok := commands[args[0]]; ok {
			fmt.Fprint(g.Stdout, newCmd(g).Usage())
			return 0
		}
	}
	fmt.Fprint(g.Stdout, mainUsage())
	return 0
}

// exitCode reports err on one line of stderr and maps it to an exit code.
func exitCode(g *Globals, name string, cmd Command, err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(g.Stdout, cmd.Usage())
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(g.Stderr, "needle: %s: %s (see 'needle help %s')\n", name, ue.msg, name)
		return 2
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(g.Stderr, "needle: %s: %v\n", name, ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(g.Stderr, "needle: %s: %v%s%s\n", name, err, olderPeerHint(err), unreachableHint(g, err))
	return 1
}

// unreachableHint says what to check when no peer answered at all (the
// connection was refused, or the host not found): a first command run
// before any needled started said only "dial tcp 127.0.0.1:7070: connect:
// connection refused".
func unreachableHint(g *Globals, err error) string {
	var op *net.OpError
	var dns *net.DNSError
	if !(errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)) {
		return ""
	}
	return fmt.Sprintf(" (no peer answers at %s: start needled there, or point --addr or NEEDLE_ADDR at a running peer)", g.Addr)
}

// olderPeerHint says why a peer may not know a route this needle calls:
// it runs an older release (a mesh upgraded after its clients, or a roll
// under way). Only the router's own answers count: "no route" (404) and a
// method the route lacks (405), not a task or schedule that is not found.
func olderPeerHint(err error) string {
	var e *api.Error
	if !errors.As(err, &e) {
		return ""
	}
	if e.Status == http.StatusNotFound && e.Code == api.CodeNotFound && strings.HasPrefix(e.Message, "no route ") ||
		e.Status == http.StatusMethodNotAllowed {
		return fmt.Sprintf(" (the peer may run an older needle than this one, %s: upgrade it, or use its release of the CLI; 'needle peers' shows each peer's version)", buildinfo.Get())
	}
	return ""
}

func mainUsage() string {
	var b strings.Builder
	b.WriteString("usage: needle [--addr URL] [--token T] <command> [flags] [args]\n" +
		"       needle --version\n\ncommands:\n")
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(&b, "  %-9s %s\n", name, summary(name))
	}
	b.WriteString("\nRun 'needle help <command>' for a command's flags. --addr defaults to\n" +
		"$NEEDLE_ADDR or " + DefaultAddr + "; --token to $NEEDLE_API_TOKEN (or the\n" +
		"contents of the file $NEEDLE_API_TOKEN_FILE names).\n\n" +
		"Exit status: 0 done; 1 failed (refused by the peer, no peer answers, a task\n" +
		"failed); 2 a usage error, nothing sent (a flag, an argument, or a -f,\n" +
		"--payload @FILE or --cacert file that cannot be read or used).\n")
	return b.String()
}

// summary returns a command's one-line description: its entry in
// summaries, else the first line of its Usage after the synopsis.
func summary(name string) string {
	if s, ok := summaries[name]; ok {
		return s
	}
	_, desc, _ := strings.Cut(commands[name](&Globals{}).Usage(), "\n\n")
	line, _, _ := strings.Cut(strings.TrimSpace(desc), "\n")
	return line
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError ends the command with code, printing err when non-nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// flagSet returns a flag set with the global flags, so that they also work
// after the command name. Errors are returned, not printed.
func (g *Globals) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.Addr, "addr", g.Addr, "API base `URL` of any peer (env NEEDLE_ADDR)")
	fs.Var(hiddenFlag{&g.Token}, "token", "API bearer `token` (env NEEDLE_API_TOKEN)")
	fs.StringVar(&g.CACert, "cacert", g.CACert, "PEM `file` of the CA that signed the peers' TLS certificate, trusted beside the system's (env NEEDLE_CACERT)")
	return fs
}

// hiddenFlag is a flag whose value help never prints (the token from the
// environment was the -token default in every command's help).
type hiddenFlag struct{ s *string }

func (v hiddenFlag) String() string { return "" }
func (v hiddenFlag) Set(s string) error {
	*v.s = s
	return nil
}

// parse parses flags and positional arguments in any order ("--" ends the
// flags) and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: flagnear.Explain(fs, err).Error()}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageOf renders a command's help: a synopsis and its flags.
func usageOf(synopsis string, fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString(synopsis)
	b.WriteString("\n\nflags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

// client returns an API client for the global settings.
func (g *Globals) client() *api.Client {
	addr := strings.TrimRight(g.Addr, "/")
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	c := &api.Client{BaseURL: addr, Token: g.Token}
	if g.CACert != "" {
		c.HTTP = &http.Client{Transport: caTransport(g.CACert)}
	}
	return c
}

// caTransport is the default transport trusting the CA in the PEM file
// path too (a mesh serving a private certificate: --tls-cert). A file
// that cannot be read fails every request with the reason.
func caTransport(path string) http.RoundTripper {
	pem, err := os.ReadFile(path)
	if err != nil {
		return failingTransport{&exitError{code: 2, err: fmt.Errorf("--cacert: %w", err)}} // a usage error, as a missing -f file
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return failingTransport{&exitError{code: 2, err: fmt.Errorf("--cacert %s: no PEM certificate in it", path)}}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t
}

// failingTransport fails every request with err.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// created prints what a create command made (submit, schedule add,
// schedule trigger), by one convention (docs/usage.md, Scripting): the new
// id alone on stdout, so that id=$(needle ...) takes it, and a one-line
// summary for a human on stderr. --json prints the API's answer on stdout
// instead, and no summary.
func (g *Globals) created(id, summary string) error {
	if _, err := fmt.Fprintln(g.Stdout, id); err != nil {
		return err
	}
	_, err := fmt.Fprintln(g.Stderr, summary)
	return err
}

// tasks counts n tasks in words: "1 task", "3 tasks".
func tasks(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}
