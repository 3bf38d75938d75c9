package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/cmd/internal/buildinfo"
)

// VersionCommand prints this CLI's version and the version of the peer at
// --addr, the two an upgrade under way may tell apart.
type VersionCommand struct {
	*Globals
	client  bool
	timeout time.Duration
}

func (c *VersionCommand) flags() *flag.FlagSet {
	fs := c.flagSet("version")
	fs.BoolVar(&c.client, "client", false, "print only this CLI's version; ask no peer")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "give up on the peer after this long")
	return fs
}

// Usage returns the help of version.
func (c *VersionCommand) Usage() string {
	return usageOf("usage: needle version [--client] [--timeout D]\n\n"+
		"Prints this CLI's version, then the version of the peer at --addr (from\n"+
		"GET /v1/peers; 'needle peers' shows every peer's). Exits 1 when the peer\n"+
		"cannot be asked, after printing the CLI's version; --client asks no peer.\n"+
		"needle --version prints the CLI's alone.", c.flags())
}

// Run prints the versions.
func (c *VersionCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintln(c.Stdout, "client:", buildinfo.Get())
	if c.client {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ps, err := c.Globals.client().Peers(ctx)
	if err != nil {
		return fmt.Errorf("peer %s: %w", c.Addr, err)
	}
	version := "unknown (a release older than its version field)"
	for _, p := range ps.Peers {
		if p.ID == ps.Self && p.Version != "" {
			version = p.Version
		}
	}
	fmt.Fprintf(c.Stdout, "peer:   %s (%s, %s)\n", version, ps.Self, c.Addr)
	return nil
}
