package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Polling bounds of wait.
const (
	taskPollWait  = 30 * time.Second       // ?wait= of one task long poll
	firstPollWait = 2 * time.Second        // ?wait= of the first: soon enough to say why a task waits
	groupPollWait = time.Second            // ?wait= of one group poll (progress refresh)
	minPollGap    = 200 * time.Millisecond // pause when a poll returns early
	lineInterval  = 5 * time.Second        // plain progress lines without a terminal
	// A group whose READY tasks finish none for stallLook has its tasks
	// read to say why they wait, again at most every stallRelook.
	stallLook   = 2 * time.Second
	stallRelook = 30 * time.Second
)

// WaitCommand waits until a task or group is terminal.
type WaitCommand struct {
	*Globals
	timeout time.Duration
	asJSON  bool
	// lineInterval is the period of plain progress lines; 0 = lineInterval.
	lineInterval time.Duration
	// stallLook is how long a group's READY tasks finish none before wait
	// reads why they wait; 0 = stallLook.
	stallLook time.Duration
}

func (c *WaitCommand) flags() *flag.FlagSet {
	fs := c.flagSet("wait")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up after this long (exit 1); 0 waits forever")
	fs.BoolVar(&c.asJSON, "json", false, "print the task or group as JSON when done")
	return fs
}

// Usage returns the help of wait.
func (c *WaitCommand) Usage() string {
	return usageOf("usage: needle wait ID [--timeout D] [--json]\n\n"+
		"Waits for a task (prints its result) or a group (shows progress on stderr).\n"+
		"Exits 0 when it SUCCEEDED, 1 otherwise.", c.flags())
}

// Run waits.
func (c *WaitCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one task or group id")
	}
	if c.timeout < 0 {
		return usagef("--timeout must be >= 0")
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if isTaskID(pos[0]) {
		return c.waitTask(ctx, pos[0])
	}
	return c.waitGroup(ctx, pos[0])
}

// isTaskID tells a task id ("<group>.<n>") from a group id.
func isTaskID(id string) bool {
	_, _, ok := shard.TaskID(id).Split()
	return ok
}

// pollWait is the long-poll wait that ends before ctx's deadline.
func pollWait(ctx context.Context, max time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		max = min(max, time.Until(dl)-50*time.Millisecond)
	}
	return max.Round(time.Millisecond)
}

// pause sleeps for the rest of minPollGap after a poll that started at
// start, so that a backend answering early is not hammered.
func pause(ctx context.Context, start time.Time) {
	if gap := minPollGap - time.Since(start); gap > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(gap):
		}
	}
}

// waitTask long-polls a task until it is terminal and prints its result.
func (c *WaitCommand) waitTask(ctx context.Context, id string) error {
	cl := c.client()
	state, waiting := "unknown", ""
	for wait := firstPollWait; ; wait = taskPollWait {
		start := time.Now()
		t, err := cl.GetTask(ctx, id, pollWait(ctx, wait))
		if err != nil {
			return c.waitFailed(ctx, err, "task", id, state)
		}
		state = t.State
		if t.Waiting != waiting {
			// A READY task no live peer or worker may run (a handler no
			// worker serves, a label no peer carries) waits until one
			// comes: say so, once per reason, rather than wait silently.
			waiting = t.Waiting
			if waiting != "" {
				fmt.Fprintf(c.Stderr, "needle: wait: %s is %s: %s\n", id, t.State, waiting)
			}
		}
		if waiting != "" {
			state = t.State + " (" + waiting + ")"
		}
		if st, ok := shard.ParseState(t.State); ok && st.Terminal() {
			return c.taskDone(t)
		}
		if ctx.Err() != nil {
			return c.waitFailed(ctx, ctx.Err(), "task", id, state)
		}
		pause(ctx, start)
	}
}

// waitFailed reports a poll error, or a timeout with the last known state.
func (c *WaitCommand) waitFailed(ctx context.Context, err error, kind, id, state string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &exitError{code: 1, err: fmt.Errorf("timed out after %s; %s %s is %s", c.timeout, kind, id, state)}
	}
	return err
}

// taskDone prints a terminal task: its result, or the task as JSON.
func (c *WaitCommand) taskDone(t *api.Task) error {
	if c.asJSON {
		if err := printJSON(c.Stdout, t); err != nil {
			return err
		}
	} else if t.State == "SUCCEEDED" {
		res := t.Result
		if len(res) == 0 {
			res = []byte("null")
		}
		fmt.Fprintf(c.Stdout, "%s\n", res)
	}
	if t.State == "SUCCEEDED" {
		return nil
	}
	msg := fmt.Sprintf("task %s %s", t.ID, t.State)
	if t.Error != nil {
		msg += ": " + *t.Error
	}
	return &exitError{code: 1, err: errors.New(msg)}
}

// waitGroup polls a group's summary until it is terminal, showing
// progress on stderr.
func (c *WaitCommand) waitGroup(ctx context.Context, id string) error {
	cl := c.client()
	prog := c.progress(id)
	state, why := "unknown", ""
	said := map[string]bool{}
	lastDone, progressed := -1, time.Now()
	var looked time.Time
	stall := c.stallLook
	if stall <= 0 {
		stall = stallLook
	}
	for {
		start := time.Now()
		g, err := cl.GroupSummary(ctx, id, pollWait(ctx, groupPollWait))
		if err != nil {
			prog.finish()
			return c.waitFailed(ctx, err, "group", id, state)
		}
		done := doneCount(g)
		if done != lastDone {
			lastDone, progressed, why = done, time.Now(), ""
		}
		prog.update(done, g.Total)
		if g.State != "RUNNING" {
			prog.finish()
			return c.groupDone(ctx, g, time.Since(prog.start()))
		}
		// A group stuck on a task no live peer or worker may run said
		// nothing where a task's wait says why (a misspelt handler: "1/2
		// done, eta ?" until the timeout).
		if g.Counts["READY"] > 0 && time.Since(progressed) >= stall && time.Since(looked) >= stallRelook {
			looked = time.Now()
			why = c.whyGroupWaits(ctx, id, said)
		}
		state = g.State
		if why != "" {
			state += " (" + why + ")"
		}
		if ctx.Err() != nil {
			prog.finish()
			return c.waitFailed(ctx, ctx.Err(), "group", id, state)
		}
		pause(ctx, start)
	}
}

// whyGroupWaits reads the group's tasks and prints why its READY tasks
// wait, once per reason (at most three), naming a task of each; it returns
// the first reason, "" when none waits or the read failed.
func (c *WaitCommand) whyGroupWaits(ctx context.Context, id string, said map[string]bool) string {
	g, err := c.client().GetGroup(ctx, id, 0)
	if err != nil {
		return ""
	}
	first := ""
	for _, t := range g.Tasks {
		if t.Waiting == "" {
			continue
		}
		if first == "" {
			first = t.Waiting
		}
		if !said[t.Waiting] && len(said) < 3 {
			said[t.Waiting] = true
			fmt.Fprintf(c.Stderr, "needle: wait: %s is %s: %s\n", t.ID, t.State, t.Waiting)
		}
	}
	return first
}

// doneCount counts the terminal tasks of a group.
func doneCount(g *api.Group) int {
	return g.Counts["SUCCEEDED"] + g.Counts["FAILED"] + g.Counts["CANCELED"]
}

func countsLine(g *api.Group) string {
	return fmt.Sprintf("%d succeeded, %d failed, %d canceled of %d",
		g.Counts["SUCCEEDED"], g.Counts["FAILED"], g.Counts["CANCELED"], g.Total)
}

// groupDone reports a terminal group: exit 0 only when it SUCCEEDED.
func (c *WaitCommand) groupDone(ctx context.Context, g *api.Group, took time.Duration) error {
	if c.asJSON {
		full, err := c.client().GetGroup(ctx, g.ID, 0)
		if err != nil {
			return err
		}
		if err := printJSON(c.Stdout, full); err != nil {
			return err
		}
	}
	if g.State != "SUCCEEDED" {
		return &exitError{code: 1, err: fmt.Errorf("group %s %s: %s", g.ID, g.State, countsLine(g))}
	}
	fmt.Fprintf(c.Stderr, "group %s SUCCEEDED: %s in %s\n", g.ID, countsLine(g), took.Round(time.Millisecond))
	return nil
}

// progress shows a group's progress on stderr.
type progress interface {
	update(done, total int)
	finish()
	start() time.Time
}

func (c *WaitCommand) progress(id string) progress {
	if c.StderrTTY {
		return &barProgress{id: id, w: c.Stderr, t0: time.Now()}
	}
	every := c.lineInterval
	if every <= 0 {
		every = lineInterval
	}
	return &lineProgress{id: id, w: c.Stderr, every: every, t0: time.Now()}
}

// barProgress redraws a progress bar (done/total, rate, ETA) on a terminal.
type barProgress struct {
	id  string
	w   io.Writer
	t0  time.Time
	bar *progressbar.ProgressBar
}

func (p *barProgress) update(done, total int) {
	if p.bar == nil {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.id),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionSetPredictTime(done < total)}
		if done < total {
			// A rate and an estimate only for work seen finishing: a group
			// done at the first look has neither.
			opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString("tasks"))
		}
		p.bar = progressbar.NewOptions(total, opts...)
	}
	if total != p.bar.GetMax() {
		p.bar.ChangeMax(total)
	}
	_ = p.bar.Set(done)
}

func (p *barProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

func (p *barProgress) start() time.Time { return p.t0 }

// lineProgress prints a plain line every period, for logs and pipes.
type lineProgress struct {
	id          string
	w           io.Writer
	every       time.Duration
	t0, last    time.Time
	done, total int
	seen        bool             // done0 is set
	done0       int              // the tasks done at the first look, not counted in the rate
	now         func() time.Time // the clock; nil is time.Now
}

// minRateWindow is the least time a rate is measured over: a rate over
// less (or over no task seen finishing) is noise, and is not printed.
const minRateWindow = 250 * time.Millisecond

func (p *lineProgress) update(done, total int) {
	p.done, p.total = done, total
	if !p.seen {
		p.seen, p.done0 = true, done
	}
	now := time.Now()
	if p.now != nil {
		now = p.now()
	}
	if now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	el := now.Sub(p.t0)
	// The rate counts only the tasks seen finishing during the wait: a
	// group already done at the first look has none (it printed "4/4
	// done, 2784.9 tasks/s", the done tasks over a few milliseconds).
	rate, rateText := 0.0, ""
	if done > p.done0 && el >= minRateWindow {
		rate = float64(done-p.done0) / el.Seconds()
		rateText = fmt.Sprintf(", %.1f tasks/s", rate)
	}
	eta := ", eta ?"
	switch {
	case done >= total:
		eta = "" // nothing left to estimate
	case rate > 0:
		eta = ", eta " + (time.Duration(float64(total-done)/rate*1e9) * time.Nanosecond).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "%s: %d/%d done%s, elapsed %s%s\n", p.id, done, total, rateText, el.Round(time.Second), eta)
}

func (p *lineProgress) finish()          {}
func (p *lineProgress) start() time.Time { return p.t0 }
