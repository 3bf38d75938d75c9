package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// LogsCommand prints a task's log, or follows it.
type LogsCommand struct {
	*Globals
	follow  bool
	attempt int
	asJSON  bool
	ctx     context.Context // Run's, for onEvent's look at the task
	id      string
	ran     bool // a follow saw an attempt
}

func (c *LogsCommand) flags() *flag.FlagSet {
	fs := c.flagSet("logs")
	fs.BoolVar(&c.follow, "f", false, "follow: print new lines as the task runs, until it ends")
	fs.IntVar(&c.attempt, "attempt", 0, "the attempt (its run number); 0 = the latest")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON (not with -f)")
	return fs
}

// Usage returns the help of logs.
func (c *LogsCommand) Usage() string {
	return usageOf("usage: needle logs TASK-ID [-f] [--attempt N] [--json]\n\n"+
		"Prints what a task's handler logged in one attempt (a Go handler's Call.Log,\n"+
		"an exec command's stderr), kept by the peer that ran it.", c.flags())
}

// Run prints the log.
func (c *LogsCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || !isTaskID(pos[0]) {
		return usagef("want exactly one task id (<group>.<n>)")
	}
	if c.attempt < 0 {
		return usagef("--attempt wants a positive number")
	}
	c.ctx, c.id = ctx, pos[0]
	if c.follow {
		return c.client().FollowLogs(ctx, pos[0], c.attempt, c.onEvent)
	}
	l, err := c.client().TaskLogs(ctx, pos[0], c.attempt)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, l)
	}
	c.printHead(l)
	for _, ln := range l.Lines {
		c.printLine(ln)
	}
	return nil
}

func (c *LogsCommand) printHead(l *api.TaskLogs) {
	switch {
	case l.Attempt == 0 && l.Terminal:
		c.printNoRun()
	case l.Attempt == 0:
		fmt.Fprintf(c.Stderr, "%s has not run yet\n", l.Task)
	case l.Unavailable != "":
		fmt.Fprintf(c.Stderr, "%s attempt %d on %s: %s\n", l.Task, l.Attempt, l.Peer, l.Unavailable)
	default:
		fmt.Fprintf(c.Stderr, "%s attempt %d on %s\n", l.Task, l.Attempt, l.Peer)
	}
	if l.DroppedBytes > 0 {
		fmt.Fprintf(c.Stderr, "... %d bytes cut from the head (the peer keeps the last --max-log bytes)\n", l.DroppedBytes)
	}
}

// printNoRun says why a terminal task has no log: it ended without a run
// (it said "has not run yet" of a task canceled before it ran, which never
// will).
func (c *LogsCommand) printNoRun() {
	t, err := c.client().GetTask(c.ctx, c.id, 0)
	switch {
	case err != nil:
		fmt.Fprintf(c.Stderr, "%s ended without running\n", c.id)
	case t.State == "CANCELED":
		fmt.Fprintf(c.Stderr, "%s was canceled before it ran\n", c.id)
	default:
		fmt.Fprintf(c.Stderr, "%s is %s and never ran\n", c.id, t.State)
	}
}

func (c *LogsCommand) printLine(ln api.LogLine) {
	fmt.Fprintf(c.Stdout, "%s %s\n", ln.At.Format(time.TimeOnly+".000"), ln.Text)
}

func (c *LogsCommand) onEvent(event string, data []byte) error {
	switch event {
	case "attempt":
		var l api.TaskLogs
		if err := json.Unmarshal(data, &l); err != nil {
			return err
		}
		c.ran = true
		c.printHead(&l)
	case "end":
		if !c.ran {
			c.printNoRun()
		}
	case "line":
		var ln api.LogLine
		if err := json.Unmarshal(data, &ln); err != nil {
			return err
		}
		c.printLine(ln)
	}
	return nil
}
