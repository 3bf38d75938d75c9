package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// SubmitCommand submits one task (flags) or a group (a JSON file).
type SubmitCommand struct {
	*Globals
	handler, payload, key, file         string
	priority, retries                   int
	timeout, backoff, maxBackoff, delay time.Duration
	asJSON, wait                        bool
	notify                              string // webhook URL (the group's "notify")
	concurrency                         int    // the -f group's "concurrency"
	require                             requireFlag
	pin                                 string
	traceparent                         string // the trace the submission joins
}

func (c *SubmitCommand) flags() *flag.FlagSet {
	fs := c.flagSet("submit")
	fs.StringVar(&c.handler, "handler", "", "handler `name` of the task")
	fs.StringVar(&c.payload, "payload", "", "task payload: `JSON`, or @FILE to read it from a file")
	fs.IntVar(&c.priority, "priority", 0, "priority; higher runs first")
	fs.DurationVar(&c.timeout, "timeout", 0, "timeout per attempt (default: the peer's)")
	fs.IntVar(&c.retries, "retries", 0, "retries after a failed attempt (max_attempts = retries+1)")
	fs.DurationVar(&c.backoff, "backoff", 0, "delay before the first retry (default 1s)")
	fs.DurationVar(&c.maxBackoff, "max-backoff", 0, "cap of the retry delay (default max(backoff, 2m))")
	fs.DurationVar(&c.delay, "delay", 0, "do not start before this long after submission")
	fs.StringVar(&c.key, "key", "", "idempotency `key`: the same key again returns the same ids")
	fs.StringVar(&c.file, "f", "", "submit the group in `FILE` (JSON body of POST /v1/groups; - for stdin)")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	fs.BoolVar(&c.wait, "wait", false, "wait for completion after submitting (exit 1 unless it succeeded)")
	fs.StringVar(&c.notify, "notify", "", "webhook `URL` called once the task (or the -f group) is terminal; must be on the peer's --notify-allow list")
	fs.IntVar(&c.concurrency, "concurrency", 0, "with -f: run at most `N` of the group's tasks at once (sets the file's \"concurrency\")")
	fs.Var(&c.require, "require", "`key=value` label a peer must carry to run the task (repeatable)")
	fs.StringVar(&c.pin, "pin", "", "run the task only on the peer with this `ID`")
	fs.StringVar(&c.traceparent, "traceparent", c.Traceparent, "W3C `traceparent` the submission joins (default: env TRACEPARENT, set in exec tasks)")
	return fs
}

// Usage returns the help of submit.
func (c *SubmitCommand) Usage() string {
	return usageOf("usage: needle submit --handler NAME [--payload JSON] [flags]\n"+
		"       needle submit -f group.json [--json] [--wait]\n\n"+
		"Submits a task and prints its id, or a group and prints the group id, alone\n"+
		"on stdout (id=$(needle submit ...)); a summary goes to stderr. With --wait,\n"+
		"what needle wait prints follows on stdout (a task's result on the next line).", c.flags())
}

// Run submits.
func (c *SubmitCommand) Run(ctx context.Context, args []string) error {
	fs := c.flags()
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	ctx = api.WithTraceparent(ctx, c.traceparent)
	if c.file != "" {
		for _, name := range []string{"handler", "payload", "priority", "timeout", "retries", "backoff", "max-backoff", "delay", "key", "require", "pin"} {
			if set[name] {
				return usagef("-f and --%s do not mix: put task fields in the file", name)
			}
		}
		return c.submitGroup(ctx, set)
	}
	if set["concurrency"] {
		return usagef("--concurrency is for a group (-f): a single task runs once at a time")
	}
	req, err := c.taskRequest(set)
	if err != nil {
		return err
	}
	resp, err := c.client().SubmitTask(ctx, req)
	if err != nil {
		return err
	}
	if c.asJSON && !c.wait {
		return printJSON(c.Stdout, resp)
	}
	summary := fmt.Sprintf("submitted task %s (handler %s, group %s)", resp.ID, req.Handler, resp.Group)
	if !resp.Created {
		summary = fmt.Sprintf("task %s was submitted before with key %q: nothing new", resp.ID, req.Key)
	}
	if err := c.created(resp.ID, summary); err != nil {
		return err
	}
	if c.wait {
		return (&WaitCommand{Globals: c.Globals, asJSON: c.asJSON}).waitTask(ctx, resp.ID)
	}
	return nil
}

// taskRequest builds the request of a single task from the flags.
func (c *SubmitCommand) taskRequest(set map[string]bool) (*api.SubmitTaskRequest, error) {
	if c.handler == "" {
		return nil, usagef("--handler or -f is required")
	}
	req := &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: c.handler, Priority: int32(c.priority)}, Key: c.key}
	req.Notify = c.notify
	req.Require, req.Pin = c.require, c.pin
	if int(req.Priority) != c.priority {
		return nil, usagef("--priority %d out of range", c.priority)
	}
	if c.payload != "" {
		p, err := readPayload(c.payload)
		if err != nil {
			return nil, err
		}
		req.Payload = p
	}
	durations := []struct {
		name string
		d    time.Duration
		dst  *string
	}{{"timeout", c.timeout, &req.Timeout}, {"delay", c.delay, &req.Delay}}
	for _, d := range durations {
		if set[d.name] {
			*d.dst = d.d.String()
		}
	}
	if set["retries"] || set["backoff"] || set["max-backoff"] {
		if c.retries < 0 {
			return nil, usagef("--retries must be >= 0")
		}
		req.Retry = &api.RetryPolicy{MaxAttempts: c.retries + 1}
		if set["backoff"] {
			req.Retry.Backoff = c.backoff.String()
		}
		if set["max-backoff"] {
			req.Retry.MaxBackoff = c.maxBackoff.String()
		}
	}
	return req, nil
}

// requireFlag is the repeatable --require key=value flag; the peer checks
// the selectors (a bad one is a 400 naming it).
type requireFlag []string

func (r *requireFlag) String() string     { return strings.Join(*r, ",") }
func (r *requireFlag) Set(v string) error { *r = append(*r, v); return nil }

// readPayload returns the JSON of --payload (inline or @FILE).
func readPayload(arg string) (json.RawMessage, error) {
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		return readJSONFile(name, nil)
	}
	data := []byte(arg)
	if !json.Valid(data) {
		return nil, usagef("--payload is not valid JSON (quote strings: '\"text\"')")
	}
	return data, nil
}

func (c *SubmitCommand) submitGroup(ctx context.Context, set map[string]bool) error {
	body, err := readJSONFile(c.file, c.Stdin)
	if err != nil {
		return err
	}
	if set["notify"] {
		if body, err = withField(body, "notify", c.notify); err != nil {
			return err
		}
	}
	if set["concurrency"] {
		if c.concurrency < 1 {
			return usagef("--concurrency must be >= 1")
		}
		if body, err = withField(body, "concurrency", c.concurrency); err != nil {
			return err
		}
	}
	resp, err := c.client().SubmitGroupJSON(ctx, body)
	if err != nil {
		return err
	}
	if c.asJSON && !c.wait {
		return printJSON(c.Stdout, resp)
	}
	summary := fmt.Sprintf("submitted group %s (%s)", resp.Group, tasks(len(resp.Tasks)))
	if !resp.Created {
		summary = fmt.Sprintf("group %s was submitted before with its key: nothing new", resp.Group)
	}
	if err := c.created(resp.Group, summary); err != nil {
		return err
	}
	if c.wait {
		return (&WaitCommand{Globals: c.Globals, asJSON: c.asJSON}).waitGroup(ctx, resp.Group)
	}
	return nil
}

// withField sets (or replaces) field name of a group body (--notify,
// --concurrency).
func withField(body []byte, name string, v any) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, usagef("--%s with -f needs a JSON object in the file: %v", name, err)
	}
	u, _ := json.Marshal(v)
	obj[name] = u
	return json.Marshal(obj)
}

// printJSON prints v indented.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
