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
	ifMatch                                      string
}

func (c *ScheduleCommand) flags() *flag.FlagSet {
	fs := c.flagSet("schedule")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	fs.StringVar(&c.name, "name", "", "add, edit: the schedule's name")
	fs.StringVar(&c.cron, "cron", "", "add, edit: cron `EXPR` (5 fields, or 6 with leading seconds, or @daily ...)")
	fs.StringVar(&c.every, "every", "", "add, edit: fire every `DURATION` (>= 1s) instead of a cron expression")
	fs.StringVar(&c.tz, "tz", "", "add, edit: IANA time `ZONE` of the cron expression (default UTC)")
	fs.StringVar(&c.tz, "timezone", "", "add, edit: the same as --tz")
	fs.StringVar(&c.ifMatch, "if-match", "", "edit: change it only if it is still at `REVISION` (its revision field)")
	fs.StringVar(&c.overlap, "overlap", "", "add, edit: skip (default: no firing while the last group runs) or allow")
	fs.StringVar(&c.misfire, "misfire", "", "add, edit: once (default: fire once for ticks missed in downtime) or skip")
	fs.StringVar(&c.key, "key", "", "add, trigger: idempotency `KEY` (a retried trigger with the same key fires once)")
	fs.BoolVar(&c.paused, "paused", false, "add: create it paused")
	fs.StringVar(&c.file, "f", "", "add, edit: the group each firing creates, in `FILE` (JSON body of POST /v1/groups; - for stdin)")
	fs.StringVar(&c.handler, "handler", "", "add, edit: a single-task group running `HANDLER` (instead of -f)")
	fs.StringVar(&c.payload, "payload", "", "add, edit: the task's payload `JSON` (with --handler)")
	return fs
}

// Usage returns the help of schedule.
func (c *ScheduleCommand) Usage() string {
	return usageOf("usage: needle schedule add (--cron EXPR | --every D) (-f FILE | --handler H) [flags]\n"+
		"       needle schedule list|get ID|rm ID|pause ID|resume ID [--json]\n"+
		"       needle schedule edit ID [--cron EXPR | --every D] [--tz ZONE] [--overlap O] [--misfire M]\n"+
		"            [--name N] [-f FILE | --handler H [--payload JSON]] [--if-match REVISION] [--json]\n"+
		"       needle schedule trigger ID [--key KEY] [--json]\n\n"+
		"Manages schedules: each firing creates one group. add prints the new\n"+
		"schedule's id alone on stdout (its summary goes to stderr). trigger fires\n"+
		"one now (also while paused) and prints its group id the same way; the next\n"+
		"regular tick stays.\n"+
		"edit changes the settings given in place (its id, firings and pause state\n"+
		"stay; the next tick is recomputed from the new settings).", c.flags())
}

// Run runs a schedule subcommand.
func (c *ScheduleCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("want a subcommand: add, list, get, edit, rm, pause, resume or trigger")
	}
	sub := args[0]
	switch {
	case sub == "help" || sub == "-h" || sub == "-help" || sub == "--help":
		return flag.ErrHelp
	case strings.HasPrefix(sub, "-"):
		return usagef("want a subcommand before the flags (add, list, get, edit, rm, pause, resume or trigger), not %q", sub)
	}
	fs := c.flags()
	pos, err := parse(fs, args[1:])
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
		if c.asJSON {
			return printJSON(c.Stdout, s)
		}
		verb := "added schedule "
		if !s.Created {
			verb = fmt.Sprintf("schedule added before with key %q, nothing new: ", c.key)
		}
		return c.created(s.ID, verb+c.line(s))
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
	case "edit":
		if len(pos) != 1 {
			return usagef("edit wants exactly one schedule id")
		}
		req, err := c.editRequest(fs)
		if err != nil {
			return err
		}
		if s, err = cl.UpdateSchedule(ctx, pos[0], req, c.ifMatch); err != nil {
			return err
		}
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
		summary := fmt.Sprintf("schedule %s fired group %s (%s)", tr.Schedule, tr.Group, tasks(len(tr.Tasks)))
		if !tr.Created {
			summary = fmt.Sprintf("schedule %s fired group %s before with key %q: nothing new", tr.Schedule, tr.Group, c.key)
		}
		return c.created(tr.Group, summary)
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
	g, err := c.group()
	if err != nil {
		return nil, err
	}
	req.Group = g
	return req, nil
}

// group is the group template of --handler (and --payload) or -f.
func (c *ScheduleCommand) group() (json.RawMessage, error) {
	if c.handler != "" {
		task := map[string]any{"name": "t", "handler": c.handler}
		if c.payload != "" {
			if !json.Valid([]byte(c.payload)) {
				return nil, usagef("--payload is not valid JSON")
			}
			task["payload"] = json.RawMessage(c.payload)
		}
		body, _ := json.Marshal(map[string]any{"mode": "parallel", "tasks": []any{task}})
		return body, nil
	}
	body, err := readJSONFile(c.file, c.Stdin)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strings.TrimSpace(string(body))), nil
}

// editRequest is the PATCH body of the flags set on the command line.
func (c *ScheduleCommand) editRequest(fs *flag.FlagSet) (*api.UpdateScheduleRequest, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	req := &api.UpdateScheduleRequest{}
	str := func(name string, v string) *string {
		if !set[name] {
			return nil
		}
		return &v
	}
	req.Name, req.Cron, req.Every, req.Overlap, req.Misfire = str("name", c.name), str("cron", c.cron), str("every", c.every), str("overlap", c.overlap), str("misfire", c.misfire)
	if set["tz"] || set["timezone"] {
		req.Timezone = &c.tz
	}
	switch {
	case set["paused"]:
		return nil, usagef("edit does not pause nor resume: use needle schedule pause|resume ID")
	case set["key"]:
		return nil, usagef("edit takes no --key")
	case set["cron"] && set["every"]:
		return nil, usagef("want at most one of --cron and --every")
	case c.file != "" && c.handler != "":
		return nil, usagef("want at most one of -f and --handler")
	case c.payload != "" && c.handler == "":
		return nil, usagef("--payload goes with --handler")
	}
	if c.file != "" || c.handler != "" {
		g, err := c.group()
		if err != nil {
			return nil, err
		}
		req.Group = g
	}
	if req.Name == nil && req.Cron == nil && req.Every == nil && req.Timezone == nil && req.Overlap == nil && req.Misfire == nil && req.Group == nil {
		return nil, usagef("nothing to change: give at least one of --cron, --every, --tz, --overlap, --misfire, --name, -f, --handler")
	}
	return req, nil
}

func (c *ScheduleCommand) printLine(s *api.Schedule) error {
	_, err := fmt.Fprintln(c.Stdout, c.line(s))
	return err
}

// line is a schedule's one-line summary: id, state, when, name, next tick
// and firings.
func (c *ScheduleCommand) line(s *api.Schedule) string {
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
	return fmt.Sprintf("%s %s %q %s next=%s firings=%d", s.ID, state, when, s.Name, next, len(s.Firings))
}
