package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/needle-mesh/needle/peer/api"
)

// bulk is the form of retry and cancel that takes needle list's filters
// instead of an id and acts on every task that matches them.
type bulk struct {
	filter      ListCommand // the filters (needle list's)
	states      stringList
	max         int
	dryRun      bool
	concurrency int // requests in flight (0: bulkConcurrency)
}

// bulkConcurrency is how many requests the bulk form has in flight.
const bulkConcurrency = 8

// bulkAction is what the bulk form does to each task: cmd and verb name
// it, states are those it may act on (defaults: those it acts on
// without --state), do acts on one task and returns its line of output
// and whether it was a repeat (a keyed retry done before: nothing done).
type bulkAction struct {
	cmd, verb        string // "retry", "retried"
	states, defaults []string
	do               func(ctx context.Context, cl *api.Client, id string) (line string, repeat bool, err error)
	repeats          string // says what a repeat is: "already retried with this key"
}

func (b *bulk) addFlags(fs *flag.FlagSet, a *bulkAction) {
	fs.Var(&b.states, "state", "with filters: the states to act on, of "+strings.ToLower(strings.Join(a.states, ", "))+
		" (default "+strings.ToLower(strings.Join(a.defaults, ", "))+")")
	b.filter.taskFlags(fs)
	fs.IntVar(&b.max, "max", 1000, "with filters: act on none when more tasks than this match")
	fs.BoolVar(&b.dryRun, "dry-run", false, "with filters: print the tasks that match, act on none")
}

// filtered reports whether fs was given a flag of the bulk form (all but
// those named in own).
func filtered(fs *flag.FlagSet, own ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || !slices.Contains(own, f.Name) })
	return set
}

// run lists every task the filters match first (more than --max, or a
// partition that did not answer: it acts on none), then acts on each, a
// few at a time. A task its action no longer applies to when its turn
// comes (409: someone else acted on it meanwhile) is skipped; any other
// error is reported, and the command exits 1 after the rest.
func (b *bulk) run(ctx context.Context, g *Globals, a *bulkAction) error {
	if err := b.filter.checkTaskFlags(); err != nil {
		return err
	}
	if b.max < 1 {
		return usagef("--max wants a positive count")
	}
	b.filter.states = nil
	for _, s := range b.states {
		for _, sent := range strings.Split(s, ",") {
			sent = strings.TrimSpace(sent)
			st := strings.ToUpper(sent)
			if !slices.Contains(a.states, st) {
				return usagef("--state %q: want %s", sent, strings.Join(a.states, ", "))
			}
			b.filter.states = append(b.filter.states, st)
		}
	}
	if len(b.filter.states) == 0 {
		b.filter.states = a.defaults
	}
	b.filter.limit = 1000
	cl := g.client()
	q := b.filter.query()
	var ids []string
	for {
		l, err := cl.ListTasks(ctx, q)
		if err != nil {
			return err
		}
		if len(l.MissingPartitions) > 0 {
			return &exitError{code: 1, err: fmt.Errorf("%d partitions did not answer (their tasks would be missed): %v; none %s, try again", len(l.MissingPartitions), l.MissingPartitions, a.verb)}
		}
		for _, t := range l.Tasks {
			ids = append(ids, t.ID)
		}
		if len(ids) > b.max {
			return &exitError{code: 1, err: fmt.Errorf("more than %d tasks match (--max); none %s: narrow the filters or raise --max", b.max, a.verb)}
		}
		if l.Cursor == "" {
			break
		}
		q.Set("cursor", l.Cursor)
	}
	if b.dryRun || len(ids) == 0 {
		for _, id := range ids {
			fmt.Fprintln(g.Stdout, id)
		}
		fmt.Fprintf(g.Stderr, "%d tasks match; none %s\n", len(ids), a.verb)
		return nil
	}
	type outcome struct {
		line   string
		repeat bool
		err    error
	}
	out := make([]outcome, len(ids))
	sem := make(chan struct{}, cmp.Or(b.concurrency, bulkConcurrency))
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].line, out[i].repeat, out[i].err = a.do(ctx, cl, id)
		})
	}
	wg.Wait()
	var done, repeats, skipped, failed int
	var firstErr error
	for i, o := range out {
		var ae *api.Error
		switch {
		case o.err == nil && o.repeat:
			repeats++
			fmt.Fprintf(g.Stdout, "%s (%s)\n", o.line, a.repeats)
		case o.err == nil:
			done++
			fmt.Fprintln(g.Stdout, o.line)
		case errors.As(o.err, &ae) && ae.Status == http.StatusConflict:
			skipped++
			fmt.Fprintf(g.Stderr, "needle: %s: %s skipped: %s\n", a.cmd, ids[i], ae.Message)
		default:
			failed++
			firstErr = cmp.Or(firstErr, o.err)
			fmt.Fprintf(g.Stderr, "needle: %s: %s: %v\n", a.cmd, ids[i], o.err)
		}
	}
	// A repeat is not counted as done: it did nothing (a keyed bulk retry
	// run again said "retried 34 of 34" though nothing ran).
	rep := ""
	if repeats > 0 {
		rep = fmt.Sprintf("%d %s, ", repeats, a.repeats)
	}
	fmt.Fprintf(g.Stderr, "%s %d of %d matching tasks (%s%d skipped, %d errors)\n", a.verb, done, len(ids), rep, skipped, failed)
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of the requests failed, the first: %w", failed, firstErr)}
	}
	return nil
}
