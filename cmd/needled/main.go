// Command needled runs one needle peer: the scheduler, the worker pool and
// the HTTP API described in docs/api.md and docs/openapi.yaml.
//
// Every flag can also be set as an environment variable NEEDLE_<NAME>, with
// the flag's name upper-cased and dashes turned to underscores (--data ->
// NEEDLE_DATA, --default-timeout -> NEEDLE_DEFAULT_TIMEOUT). A flag on the
// command line wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/needle-mesh/needle/internal/hugepages"
)

func main() {
	// Before anything is created: Badger creates its files 0666 less the
	// umask, so under the usual 022 its memtable and value log, which hold
	// task payloads in clear, were readable by every local user. exec
	// tasks inherit it (docs/usage.md).
	syscall.Umask(0o077)
	tuneGC(os.Getenv)
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		if errors.Is(err, ErrVersion) {
			fmt.Println(Version())
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "needled:", err)
		os.Exit(2)
	}
	if m.HugePages && !m.Init {
		r := hugepages.Enable(0)
		m.HugePagesResult = &r
	}
	if m.Init {
		if err := m.RunInit(os.Stdout); err != nil {
			m.fatal(err)
			os.Exit(ExitCode(err))
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m.Hangup = notifyHangup()
	if err := m.Run(ctx); err != nil {
		m.fatal(err)
		os.Exit(ExitCode(err))
	}
}

// notifyHangup catches SIGHUP from now on, for Main.Hangup (a reload of
// the API token file): Go's default for it is to exit at once, with no
// drain and no log line.
func notifyHangup() <-chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}
