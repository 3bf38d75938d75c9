package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/needle-mesh/needle/bench"
	"github.com/needle-mesh/needle/internal/flagnear"
)

// HostileCommand attacks a mesh of real peers on loopback with random
// valid-shaped API requests and random wire messages from a keyed host,
// and checks that it held (package bench, Hostile).
type HostileCommand struct{}

// Usage returns the help text of `needle hostile`.
func (HostileCommand) Usage() string {
	return strings.TrimSpace(`
usage: needle hostile [flags]

Starts --peers needled processes on loopback with a swarm key, then for
--duration: --clients HTTP clients post random valid-shaped requests (tasks,
groups of every mode, schedules, cancels, retries, lists, reads; a third of
them with hostile values in random fields: huge or negative numbers,
overflowing durations, 70,000-byte strings, thousands of selectors, deep
nesting, unknown fields), garbage bodies and unknown routes; and a host that
holds the swarm key but is no member sends about a hundred wire messages a second
(Raft messages of every type with terms and indexes out of range, forged
outcomes and grants for real tasks, heartbeats with random membership, the
same mutated, random bytes) as messages, calls and gossip.

Then it deletes its schedules, cancels what it submitted with hostile values,
and waits for every acknowledged task to finish. Exits non-zero when a peer
crashed, a request answered 500, or an acknowledged task did not finish.

flags:
  --needled PATH     needled binary (default: next to needle, else in PATH)
  --peers N          peers (default 3)
  --duration D       how long to attack (default 10m)
  --seed N           seed of the requests and messages (default 1)
  --clients N        concurrent HTTP clients (default 4)
  --wire             random wire messages from a keyed host (default true)
  --wire-types LIST  only these message types: raft, heartbeat, outcome,
                     ack, steal, grant (default all)
  --data-dir DIR     parent of the peers' data directories
  --keep             when the mesh did not hold, keep it running (addresses
                     on stderr) until interrupted, to look at
  --json FILE        also write the JSON report to FILE ("-" for stdout)
  -v                 log progress to stderr
`) + "\n"
}

// Run parses args and attacks.
func (c HostileCommand) Run(ctx context.Context, args []string) error {
	cfg := bench.DefaultHostile()
	cfg.Seed = 1
	fs := flag.NewFlagSet("needle hostile", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Needled, "needled", "", "")
	fs.IntVar(&cfg.Peers, "peers", cfg.Peers, "")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "")
	fs.BoolVar(&cfg.Wire, "wire", cfg.Wire, "")
	wireTypes := fs.String("wire-types", "", "")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "")
	fs.BoolVar(&cfg.Keep, "keep", false, "")
	jsonPath := fs.String("json", "", "")
	verbose := fs.Bool("v", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w\n\n%s", flagnear.Explain(fs, err), c.Usage())
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q\n\n%s", fs.Arg(0), c.Usage())
	case cfg.Peers < 1 || cfg.Clients < 1:
		return fmt.Errorf("--peers and --clients must be >= 1\n\n%s", c.Usage())
	case cfg.Duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v\n\n%s", cfg.Duration, c.Usage())
	}
	cfg.WireTypes = splitList(*wireTypes)
	var err error
	if cfg.Needled, err = findNeedled(cfg.Needled); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	rep, err := bench.Hostile(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout)
	if *jsonPath != "" {
		w, closeJSON, err := createJSON(*jsonPath)
		if err != nil {
			return err
		}
		if err := json.NewEncoder(w).Encode(rep); err != nil {
			closeJSON()
			return err
		}
		if err := closeJSON(); err != nil {
			return err
		}
	}
	if !rep.OK() {
		return errors.New("hostile: the mesh did not hold (see above)")
	}
	return nil
}
