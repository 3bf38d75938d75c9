package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

// HealthCommand checks that a peer is ready: the probe of container images,
// which carry no curl.
type HealthCommand struct{ *Globals }

// Usage returns the help of health.
func (c *HealthCommand) Usage() string {
	return usageOf("usage: needle health [--timeout D]\n\n"+
		"Asks the peer at --addr for GET /healthz: exit 0 when it serves and every\n"+
		"partition has a reachable owner, 1 (with the reason) otherwise. The\n"+
		"container image's HEALTHCHECK runs it.", c.flags(new(time.Duration)))
}

func (c *HealthCommand) flags(timeout *time.Duration) *flag.FlagSet {
	fs := c.flagSet("health")
	fs.DurationVar(timeout, "timeout", 5*time.Second, "give up after this long")
	return fs
}

// Run asks for /healthz.
func (c *HealthCommand) Run(ctx context.Context, args []string) error {
	var timeout time.Duration
	pos, err := parse(c.flags(&timeout), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("health takes no arguments")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.client().Health(ctx); err != nil {
		return fmt.Errorf("%s: %w", c.Addr, err)
	}
	fmt.Fprintln(c.Stdout, "ok")
	return nil
}
