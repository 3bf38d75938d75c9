package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// ScheduleCommand manages schedules: add, list, get, rm, pause, resume.
type ScheduleCommand struct {
	*Globals
	asJSON                                       bool
	name, cron, every, tz, overlap, misfire, key string
	file, handler, payload                       string
	paused                                       bool
}

func (c *ScheduleCommand) flags() *flag.FlagSet {
	fs := c.flagSet("schedule")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	fs.StringVar(&c.name, "name", "", "add: the schedule's name")
	fs.StringVar(&c.cron, "cron", "", "add: cron `EXPR` (5 fields, or 6 with leading seconds, or @daily ...)")
	fs.StringVar(&c.every, "every", "", "add: fire every `DURATION` (>= 1s) instead of a cron expression")
	fs.StringVar(&c.tz, "tz", "", "add: IANA time `ZONE` of the cron expression (default UTC)")
	fs.StringVar(&c.overlap, "overlap", "", "add: skip (default: no firing while the last group runs) or allow")
	fs.StringVar(&c.misfire, "misfire", "", "add: once (default: fire once for ticks missed in downtime) or skip")
	fs.StringVar(&c.key, "key", "", "add, trigger: idempotency `KEY` (a retried trigger with the same key fires once)")
	fs.BoolVar(&c.paused, "paused", false, "add: create it paused")
	fs.StringVar(&c.file, "f", "", "add: the group each firing creates, in `FILE` (JSON body of POST /v1/groups; - for stdin)")
	fs.StringVar(&c.handler, "handler", "", "add: a single-task group running `HANDLER` (instead of -f)")
	fs.StringVar(&c.payload, "payload", "", "add: the task's payload `JSON` (with --handler)")
	return fs
}

// Usage returns the help of schedule.
func (c *ScheduleCommand) Usage() string {
	return usageOf("usage: needle schedule add (--cron EXPR | --every D) (-f FILE | --handler H) [flags]\n"+
		"       needle schedule list|get ID|rm ID|pause ID|resume ID [--json]\n"+
		"       needle schedule trigger ID [--key KEY] [--json]\n\n"+
		"Manages schedules: each firing creates one group. trigger fires one now\n"+
		"(also while paused) and prints its group id; the next regular tick stays.", c.flags())
}

// Run runs a schedule subcommand.
func (c *ScheduleCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("want a subcommand: add, list, get, rm, pause, resume or trigger")
	}
	sub := args[0]
	switch {
	case sub == "help" || sub == "-h" || sub == "-help" || sub == "--help":
		return flag.ErrHelp
	case strings.HasPrefix(sub, "-"):
		return usagef("want a subcommand before the flags (add, list, get, rm, pause, resume or trigger), not %q", sub)
	}
	pos, err := parse(c.flags(), args[1:])
	if err != nil {
		return err
	}
	cl := c.client()
	var s *api.Schedule
	switch sub {
	case "add":
		if len(pos) != 0 {
			return usagef("add takes no arguments")
		}
		req, err := c.addRequest()
		if err != nil {
			return err
		}
		if s, err = cl.CreateSchedule(ctx, req); err != nil {
			return err
		}
	case "list", "ls":
		if len(pos) != 0 {
			return usagef("list takes no arguments")
		}
		list, err := cl.ListSchedules(ctx)
		if err != nil {
			return err
		}
		if c.asJSON {
			return printJSON(c.Stdout, list)
		}
		for i := range list {
			if err := c.printLine(&list[i]); err != nil {
				return err
			}
		}
		return nil
	case "trigger":
		if len(pos) != 1 {
			return usagef("trigger wants exactly one schedule id")
		}
		tr, err := cl.TriggerSchedule(ctx, pos[0], c.key)
		if err != nil {
			return err
		}
		if c.asJSON {
			return printJSON(c.Stdout, tr)
		}
		_, err = fmt.Fprintln(c.Stdout, tr.Group)
		return err
	case "get", "rm", "pause", "resume":
		if len(pos) != 1 {
			return usagef("%s wants exactly one schedule id", sub)
		}
		switch sub {
		case "get":
			s, err = cl.GetSchedule(ctx, pos[0])
		case "rm":
			s, err = cl.DeleteSchedule(ctx, pos[0])
		default:
			s, err = cl.PauseSchedule(ctx, pos[0], sub == "pause")
		}
		if err != nil {
			return err
		}
	default:
		return usagef("unknown schedule subcommand %q", sub)
	}
	if c.asJSON {
		return printJSON(c.Stdout, s)
	}
	if err := c.printLine(s); err != nil {
		return err
	}
	if sub == "get" {
		for _, f := range s.Firings {
			if _, err := fmt.Fprintf(c.Stdout, "  %s %s %s\n", f.At.Format(time.RFC3339), f.State, f.Group); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *ScheduleCommand) addRequest() (*api.CreateScheduleRequest, error) {
	req := &api.CreateScheduleRequest{Name: c.name, Cron: c.cron, Every: c.every, Timezone: c.tz,
		Overlap: c.overlap, Misfire: c.misfire, Paused: c.paused, Key: c.key}
	switch {
	case (c.cron == "") == (c.every == ""):
		return nil, usagef("want exactly one of --cron and --every")
	case (c.file == "") == (c.handler == ""):
		return nil, usagef("want exactly one of -f and --handler")
	}
	if c.handler != "" {
		task := map[string]any{"name": "t", "handler": c.handler}
		if c.payload != "" {
			if !json.Valid([]byte(c.payload)) {
				return nil, usagef("--payload is not valid JSON")
			}
			task["payload"] = json.RawMessage(c.payload)
		}
		body, _ := json.Marshal(map[string]any{"mode": "parallel", "tasks": []any{task}})
		req.Group = body
		return req, nil
	}
	body, err := readJSONFile(c.file, c.Stdin)
	if err != nil {
		return nil, err
	}
	req.Group = json.RawMessage(strings.TrimSpace(string(body)))
	return req, nil
}

func (c *ScheduleCommand) printLine(s *api.Schedule) error {
	when := s.Cron
	if s.Every != "" {
		when = "every " + s.Every
	}
	next := "-"
	if s.Next != nil {
		next = s.Next.Format(time.RFC3339)
	}
	state := "active"
	if s.Paused {
		state = "paused"
	}
	_, err := fmt.Fprintf(c.Stdout, "%s %s %q %s next=%s firings=%d\n", s.ID, state, when, s.Name, next, len(s.Firings))
	return err
}
