package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/needle-mesh/needle/shard"
)

// rawFields are the task fields as decoded; nested objects stay raw so that
// their errors can name their path. The request types repeat them rather
// than embed them, because encoding/json names an embedded struct in the
// path of a type error.
type rawFields struct {
	Handler  string
	Payload  json.RawMessage
	Priority int32
	Timeout  string
	Retry    json.RawMessage
	Delay    string
}

type rawSingle struct {
	Handler  string          `json:"handler"`
	Payload  json.RawMessage `json:"payload"`
	Priority int32           `json:"priority"`
	Timeout  string          `json:"timeout"`
	Retry    json.RawMessage `json:"retry"`
	Delay    string          `json:"delay"`
	Key      *string         `json:"key"` // nil: none given; "" is refused (setKeyTrace)
	Trace    string          `json:"trace"`
	Notify   string          `json:"notify"`
	Require  []string        `json:"require"`
	Pin      string          `json:"pin"`
}

func (r *rawSingle) fields() rawFields {
	return rawFields{r.Handler, r.Payload, r.Priority, r.Timeout, r.Retry, r.Delay}
}

type rawGroupTask struct {
	Name     string          `json:"name"`
	Handler  string          `json:"handler"`
	Payload  json.RawMessage `json:"payload"`
	Priority int32           `json:"priority"`
	Timeout  string          `json:"timeout"`
	Retry    json.RawMessage `json:"retry"`
	Delay    string          `json:"delay"`
	Deps     []string        `json:"deps"`
	Require  []string        `json:"require"`
	Pin      string          `json:"pin"`
}

func (r *rawGroupTask) fields() rawFields {
	return rawFields{r.Handler, r.Payload, r.Priority, r.Timeout, r.Retry, r.Delay}
}

type rawRetry struct {
	MaxAttempts *int   `json:"max_attempts"`
	Backoff     string `json:"backoff"`
	MaxBackoff  string `json:"max_backoff"`
}

// rawGroupOf is a group's body with its tasks as T: raw (rawGroup), each
// decoded alone so that an error names its task, or decoded with the
// group in one pass (rawGroupOf[rawGroupTask]), which is how a valid body
// is read (decodeGroupTo).
type rawGroupOf[T any] struct {
	Mode   string            `json:"mode"`
	Key    *string           `json:"key"` // nil: none given; "" is refused (setKeyTrace)
	Trace  string            `json:"trace"`
	Tasks  []T               `json:"tasks"`
	Stages json.RawMessage   `json:"stages"` // [[task, ...], ...] (staged) or [stage, ...] (pipeline)
	Items  []json.RawMessage `json:"items"`  // pipeline: one payload per item
	Notify string            `json:"notify"` // webhook URL
	To     string            `json:"to"`     // a broadcast's target: peers (default) or workers
	// Concurrency bounds the group's tasks in flight at once (parallel,
	// dag, pipeline); 0 = unbounded.
	Concurrency int `json:"concurrency"`
}

type rawGroup = rawGroupOf[json.RawMessage]

// rawStage is one stage of a streaming pipeline: a task template plus its
// in-flight bound.
type rawStage struct {
	Name        string          `json:"name"`
	Handler     string          `json:"handler"`
	Priority    int32           `json:"priority"`
	Timeout     string          `json:"timeout"`
	Retry       json.RawMessage `json:"retry"`
	Concurrency int             `json:"concurrency"`
}

// DecodeTask reads the body of POST /v1/tasks and returns it as a group of
// one (mode single, task name ""). Errors are *FieldError, possibly wrapping
// ErrPayloadTooLarge. The group id is left empty.
func DecodeTask(r io.Reader, lim Limits) (*shard.GroupSpec, error) {
	lim = lim.withDefaults()
	data, err := readBody(r, lim.MaxBody)
	if err != nil {
		return nil, err
	}
	var rt rawSingle
	if err := decodeStrict(data, &rt, ""); err != nil {
		return nil, err
	}
	f := rt.fields()
	ts, err := f.toSpec("", lim)
	if err != nil {
		return nil, err
	}
	if err := placement(&ts, rt.Require, rt.Pin, "", lim); err != nil {
		return nil, err
	}
	spec := &shard.GroupSpec{Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{ts}}
	if err := setKeyTrace(spec, rt.Key, rt.Trace); err != nil {
		return nil, err
	}
	if err := setNotify(spec, rt.Notify, lim); err != nil {
		return nil, err
	}
	if err := validateCore(spec); err != nil {
		return spec, err
	}
	return spec, checkForgottenPins(spec, lim)
}

// DecodeGroup reads the body of POST /v1/groups, validates it and converts
// it to a GroupSpec: tasks in body order (pipeline: stage by stage, with
// TaskSpec.Stage set and no Deps). Errors are *FieldError naming the JSON
// path, possibly wrapping ErrPayloadTooLarge. The group id is left empty.
// A broadcast stays a template (one task, not pinned), as a schedule keeps
// it; one to workers ("to": "workers") has its template named
// shard.WorkersTemplate (shard.ToWorkers).
func DecodeGroup(r io.Reader, lim Limits) (*shard.GroupSpec, error) {
	spec, to, err := decodeGroupTo(r, lim)
	if err == nil && to == ToWorkers {
		spec.Tasks[0].Name = shard.WorkersTemplate
	}
	return spec, err
}

// decodeGroupTo is DecodeGroup that also returns a broadcast's target
// ("to": ToPeers or ToWorkers), which the peer taking the request expands.
func decodeGroupTo(r io.Reader, lim Limits) (*shard.GroupSpec, string, error) {
	lim = lim.withDefaults()
	data, err := readBody(r, lim.MaxBody)
	if err != nil {
		return nil, "", err
	}
	return decodeGroupData(data, lim, true)
}

// decodeGroupData is decodeGroupTo of a body read. A valid body is parsed
// once, its tasks with the group (onePass). One that is not is parsed
// again the slow way, each task on its own, so that the error names the
// task (tasks[3].timeout): the checks after the JSON are the same either
// way. One decoder per task was a sixth of the CPU and the most allocated
// bytes of a peer under W1.
func decodeGroupData(data []byte, lim Limits, onePass bool) (*shard.GroupSpec, string, error) {
	if onePass {
		var fg rawGroupOf[rawGroupTask]
		if fastGroup(data, &fg, getRawTasks()) || decodeStrict(data, &fg, "") == nil {
			defer putRawTasks(fg.Tasks)
			return decodeGroupFrom(&fg, lim, func(i int, _ string) (*rawGroupTask, error) {
				return &fg.Tasks[i], nil
			})
		}
	}
	var rg rawGroup
	if err := decodeStrict(data, &rg, ""); err != nil {
		return nil, "", err
	}
	return decodeGroupFrom(&rg, lim, func(i int, path string) (*rawGroupTask, error) {
		rt := new(rawGroupTask)
		return rt, decodeStrict(rg.Tasks[i], rt, path)
	})
}

// rawTasks keeps the slices a group's tasks are parsed into: a thousand
// tasks are 200 KB, and growing the slice task by task allocated twice
// that for every group submitted. Nothing parsed is kept past the spec's
// making (groupTaskSpec copies what it takes), so a slice is cleared and
// reused.
var rawTasks = sync.Pool{New: func() any { return new([]rawGroupTask) }}

// maxPooledTasks bounds the slices rawTasks keeps.
const maxPooledTasks = 10000

func getRawTasks() []rawGroupTask {
	b := rawTasks.Get().(*[]rawGroupTask)
	ts := (*b)[:0]
	*b = nil
	rawTasks.Put(b)
	return ts
}

func putRawTasks(ts []rawGroupTask) {
	if ts == nil || cap(ts) > maxPooledTasks {
		return
	}
	clear(ts[:cap(ts)])
	b := rawTasks.Get().(*[]rawGroupTask)
	*b = ts[:0]
	rawTasks.Put(b)
}

// decodeGroupFrom is decodeGroupTo after the JSON: task decodes task i
// (at path) into rt.
func decodeGroupFrom[T any](rg *rawGroupOf[T], lim Limits, task func(i int, path string) (*rawGroupTask, error)) (*shard.GroupSpec, string, error) {
	var err error
	spec := &shard.GroupSpec{}
	if spec.Mode, err = rg.mode(lim); err != nil {
		return nil, "", err
	}
	to, err := checkTo(rg.To, spec.Mode)
	if err != nil {
		return nil, "", err
	}
	if err := setKeyTrace(spec, rg.Key, rg.Trace); err != nil {
		return nil, "", err
	}
	if err := setNotify(spec, rg.Notify, lim); err != nil {
		return nil, "", err
	}
	spec.Concurrency = rg.Concurrency
	var names map[string]int
	switch spec.Mode {
	case shard.ModePipeline:
		var stages [][]json.RawMessage
		if err := decodeStrict(rg.Stages, &stages, "stages"); err != nil {
			return nil, "", err
		}
		spec.Tasks, names, err = decodeStages(stages, lim)
	case shard.ModeStream:
		err = decodeStream(spec, rg.Stages, rg.Items, lim)
	default:
		spec.Tasks, names, err = decodeTasks(len(rg.Tasks), task, spec.Mode, lim)
	}
	if err != nil {
		return nil, "", err
	}
	if spec.Mode == shard.ModeDAG {
		if err := checkDeps(spec.Tasks, names); err != nil {
			return nil, "", err
		}
	}
	if err := validateCore(spec); err != nil {
		return spec, to, err
	}
	return spec, to, checkForgottenPins(spec, lim)
}

// setTraceparent makes a well-formed W3C traceparent header the
// submission's trace, in place of the body's "trace": the submit span is
// its child, and the group's tasks run in the client's trace. A malformed
// one is ignored, as the W3C Trace Context spec asks of receivers.
func setTraceparent(spec *shard.GroupSpec, h http.Header) {
	if tp := h.Get("traceparent"); validTraceparent(tp) {
		spec.Trace = tp
	}
}

// validTraceparent reports whether s is a W3C traceparent of version 00:
// 00-<trace id, 32 hex>-<parent id, 16 hex>-<flags, 2 hex>, lower case,
// neither id all zeros.
func validTraceparent(s string) bool {
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || s[:2] != "00" {
		return false
	}
	for i, c := range []byte(s) {
		if i != 2 && i != 35 && i != 52 && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return strings.Trim(s[3:35], "0") != "" && strings.Trim(s[36:52], "0") != ""
}

func setKeyTrace(spec *shard.GroupSpec, key *string, trace string) error {
	var k string
	if key != nil {
		if k = *key; k == "" {
			return errEmptyKey("key")
		}
	}
	if len(k) > maxKeyLen {
		return fieldErr("key", "longer than %d bytes", maxKeyLen)
	}
	if len(trace) > maxTraceLen {
		return fieldErr("trace", "longer than %d bytes", maxTraceLen)
	}
	spec.Key, spec.Trace = k, trace
	return nil
}

// errEmptyKey is the 400 of "key": "" (field names it). An empty
// idempotency key is almost surely a client's bug (a variable left
// unset): taken as no key, as it was, every repeat of the request
// created its work again, where the client meant it to be created once.
func errEmptyKey(field string) error {
	return fieldErr(field, `empty: leave "key" out for a request without an idempotency key`)
}

// hasEmptyKey reports whether the JSON object data has "key": "", for
// the bodies whose Key is a plain string (CreateScheduleRequest,
// TriggerRequest, RetryRequest: decoded already, so data is valid).
func hasEmptyKey(data []byte) bool {
	var k struct {
		Key *string `json:"key"`
	}
	return json.Unmarshal(data, &k) == nil && k.Key != nil && *k.Key == ""
}

// setNotify checks a webhook URL against the peer's policy (Limits.Notify)
// and sets it.
func setNotify(spec *shard.GroupSpec, url string, lim Limits) error {
	switch {
	case url == "":
		return nil
	case len(url) > shard.MaxNotifyLen:
		return fieldErr("notify", "longer than %d bytes", shard.MaxNotifyLen)
	case lim.Notify == nil:
		return fieldErr("notify", "webhooks are off on this peer: it has no notify allow-list (needled --notify-allow)")
	}
	if err := lim.Notify(url); err != nil {
		return fieldErr("notify", "%s", err.Error())
	}
	spec.Notify = url
	return nil
}

// mode resolves and checks the group's mode against tasks/stages/items.
// "pipeline" with stages of task lists is the barrier mode ("staged"), so
// bodies written for it keep working; with stage objects and items it is
// the streaming pipeline.
func (rg *rawGroupOf[T]) mode(lim Limits) (shard.Mode, error) {
	name := rg.Mode
	if name == "" {
		name = "dag"
		if rg.Stages != nil {
			name = "pipeline"
		}
	}
	m, ok := shard.ParseMode(name)
	if !ok || m == shard.ModeSingle {
		return 0, fieldErr("mode", "unknown mode %q; want dag, parallel, pipeline, staged or broadcast", rg.Mode)
	}
	if m == shard.ModeStream && stagesAreLists(rg.Stages) {
		m = shard.ModePipeline
	}
	if m == shard.ModePipeline || m == shard.ModeStream {
		if rg.Tasks != nil {
			return 0, fieldErr("tasks", "not allowed in %s mode; use stages", name)
		}
		if m == shard.ModePipeline && rg.Items != nil {
			return 0, fieldErr("items", "only for a pipeline of stage objects; staged groups list their tasks in stages")
		}
		return m, nil
	}
	switch {
	case rg.Items != nil:
		return 0, fieldErr("items", "only allowed in pipeline mode")
	case rg.Stages != nil:
		return 0, fieldErr("stages", "only allowed in pipeline mode")
	case len(rg.Tasks) == 0:
		return 0, fieldErr("tasks", "at least one task required")
	case len(rg.Tasks) > lim.MaxTasks:
		return 0, fieldErr("tasks", "%d tasks exceed the limit of %d", len(rg.Tasks), lim.MaxTasks)
	case m == shard.ModeBroadcast && len(rg.Tasks) != 1:
		return 0, fieldErr("tasks", "a broadcast takes one task template, not %d; it runs a copy on every matching live peer", len(rg.Tasks))
	}
	return m, nil
}

// decodeTasks decodes the n tasks of a dag or parallel group, task i
// through task; names maps each task name to its index.
func decodeTasks(n int, task func(i int, path string) (*rawGroupTask, error), mode shard.Mode, lim Limits) ([]shard.TaskSpec, map[string]int, error) {
	tasks := make([]shard.TaskSpec, 0, n)
	names := make(map[string]int, n)
	for i := range n {
		path := "tasks[" + strconv.Itoa(i) + "]"
		dflt := ""
		if mode == shard.ModeParallel || mode == shard.ModeBroadcast {
			dflt = "t" + strconv.Itoa(i)
		}
		rt, err := task(i, path)
		if err != nil {
			return nil, nil, err
		}
		ts, err := groupTaskSpec(rt, path, dflt, mode, lim)
		if err != nil {
			return nil, nil, err
		}
		if err := addName(names, ts.Name, len(tasks), path, func(j int) string { return "tasks[" + strconv.Itoa(j) + "]" }); err != nil {
			return nil, nil, err
		}
		tasks = append(tasks, ts)
	}
	return tasks, names, nil
}

// decodeStages decodes the stages of a pipeline group, flattened stage by
// stage.
func decodeStages(stages [][]json.RawMessage, lim Limits) ([]shard.TaskSpec, map[string]int, error) {
	if len(stages) == 0 {
		return nil, nil, fieldErr("stages", "at least one stage required")
	}
	n := 0
	for i, st := range stages {
		if len(st) == 0 {
			return nil, nil, fieldErr("stages["+strconv.Itoa(i)+"]", "empty stage; want at least one task")
		}
		n += len(st)
	}
	if n > lim.MaxTasks {
		return nil, nil, fieldErr("stages", "%d tasks exceed the limit of %d", n, lim.MaxTasks)
	}
	tasks := make([]shard.TaskSpec, 0, n)
	names := make(map[string]int, n)
	for i, st := range stages {
		for j, raw := range st {
			path := fmt.Sprintf("stages[%d][%d]", i, j)
			ts, err := decodeGroupTask(raw, path, fmt.Sprintf("s%d-%d", i, j), shard.ModePipeline, lim)
			if err != nil {
				return nil, nil, err
			}
			ts.Stage = i
			if err := addName(names, ts.Name, len(tasks), path, func(k int) string { return stagePath(tasks, k) }); err != nil {
				return nil, nil, err
			}
			tasks = append(tasks, ts)
		}
	}
	return tasks, names, nil
}

// stagesAreLists reports whether raw is a JSON array whose first element
// is an array (the barrier form of stages).
func stagesAreLists(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	rest := bytes.TrimLeft(raw[1:], " \t\r\n")
	return len(rest) > 0 && rest[0] == '['
}

// notInStage says why a streaming pipeline's stage refuses a field a task
// takes, where the decoder said "unknown field" of a field the API
// documents.
var notInStage = map[string]string{
	"payload": "not allowed in a stage: the items are the payloads (stage 0 gets its item, a later stage the previous stage's result)",
	"deps":    "not allowed in a stage: each stage takes the previous stage's result, item by item",
}

// stageFieldErr turns err, an "unknown field" of a task field in stage
// path, into what a stage takes instead.
func stageFieldErr(err error, path string) error {
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Message != "unknown field" {
		return err
	}
	name, ok := strings.CutPrefix(fe.Field, path+".")
	if !ok {
		return err
	}
	if why, ok := notInStage[name]; ok {
		return fieldErr(fe.Field, "%s", why)
	}
	switch name {
	case "delay", "key", "require", "pin": // a task's, not a stage's
		return fieldErr(fe.Field, "not allowed in a stage: a stage takes name, handler, priority, timeout, retry, concurrency")
	}
	return err
}

// decodeStream decodes a streaming pipeline: stage objects and items,
// laid out item-major (task i*len(stages)+s is item i in stage s). Only
// stage 0 carries the item as its payload: a later stage's payload is the
// previous stage's result.
func decodeStream(spec *shard.GroupSpec, rawStages json.RawMessage, items []json.RawMessage, lim Limits) error {
	var raws []json.RawMessage
	if err := decodeStrict(rawStages, &raws, "stages"); err != nil {
		return err
	}
	switch {
	case len(raws) == 0:
		return fieldErr("stages", "at least one stage required")
	case len(items) == 0:
		return fieldErr("items", "at least one item required")
	case len(raws)*len(items) > lim.MaxTasks:
		return fieldErr("items", "%d items x %d stages exceed the limit of %d tasks", len(items), len(raws), lim.MaxTasks)
	}
	templates := make([]shard.TaskSpec, len(raws))
	spec.Stages = make([]shard.StageSpec, len(raws))
	// Stage names are checked here: the core sees only the tasks they
	// name ("a/0"), and named those and tasks[j], which the client never
	// wrote.
	stageOf := make(map[string]int, len(raws))
	for i, raw := range raws {
		path := "stages[" + strconv.Itoa(i) + "]"
		var rs rawStage
		if err := decodeStrict(raw, &rs, path); err != nil {
			return stageFieldErr(err, path)
		}
		switch {
		case rs.Name == "":
			return fieldErr(join(path, "name"), "required")
		case len(rs.Name) > maxNameLen:
			return fieldErr(join(path, "name"), "longer than %d bytes", maxNameLen)
		case rs.Concurrency < 0:
			return fieldErr(join(path, "concurrency"), "must be >= 0 (0 = unbounded)")
		case rs.Concurrency > math.MaxInt32:
			return fieldErr(join(path, "concurrency"), "%d is over the maximum of %d", rs.Concurrency, math.MaxInt32)
		}
		if j, dup := stageOf[rs.Name]; dup {
			return fieldErr(join(path, "name"), "duplicate stage name %q (also stages[%d])", rs.Name, j)
		}
		stageOf[rs.Name] = i
		f := rawFields{Handler: rs.Handler, Priority: rs.Priority, Timeout: rs.Timeout, Retry: rs.Retry}
		ts, err := f.toSpec(path, lim)
		if err != nil {
			return err
		}
		ts.Payload, ts.Stage = nil, i
		templates[i] = ts
		spec.Stages[i] = shard.StageSpec{Name: rs.Name, Concurrency: rs.Concurrency}
	}
	spec.Tasks = make([]shard.TaskSpec, 0, len(items)*len(raws))
	for i, raw := range items {
		p, err := payload(raw, "items["+strconv.Itoa(i)+"]", "", lim.MaxPayload)
		if err != nil {
			return err
		}
		for s := range templates {
			ts := templates[s]
			ts.Item = i
			ts.Name = spec.Stages[s].Name + "/" + strconv.Itoa(i)
			if s == 0 {
				ts.Payload = p
			}
			spec.Tasks = append(spec.Tasks, ts)
		}
	}
	return nil
}

// addName records name as task i, or names the earlier task of that name.
func addName(names map[string]int, name string, i int, path string, pathOf func(int) string) error {
	if j, dup := names[name]; dup {
		return fieldErr(join(path, "name"), "duplicate name %q (also %s)", name, pathOf(j))
	}
	names[name] = i
	return nil
}

// decodeGroupTask decodes one task of a group at path; dflt is the name of
// an unnamed task ("" = a name is required).
func decodeGroupTask(raw json.RawMessage, path, dflt string, mode shard.Mode, lim Limits) (shard.TaskSpec, error) {
	var rt rawGroupTask
	if err := decodeStrict(raw, &rt, path); err != nil {
		return shard.TaskSpec{}, err
	}
	return groupTaskSpec(&rt, path, dflt, mode, lim)
}

// groupTaskSpec checks task rt of a group, at path, and returns its spec;
// dflt is the name of an unnamed task ("" = a name is required).
func groupTaskSpec(rt *rawGroupTask, path, dflt string, mode shard.Mode, lim Limits) (shard.TaskSpec, error) {
	f := rt.fields()
	ts, err := f.toSpec(path, lim)
	if err != nil {
		return shard.TaskSpec{}, err
	}
	switch ts.Name = rt.Name; {
	case ts.Name == "" && dflt == "":
		return ts, fieldErr(join(path, "name"), "required in %s mode", mode)
	case ts.Name == "":
		ts.Name = dflt
	case len(ts.Name) > maxNameLen:
		return ts, fieldErr(join(path, "name"), "longer than %d bytes", maxNameLen)
	}
	if rt.Deps != nil && mode != shard.ModeDAG {
		return ts, fieldErr(join(path, "deps"), "not allowed in %s mode", mode)
	}
	if len(rt.Deps) > maxDepsLen {
		return ts, fieldErr(join(path, "deps"), "%d deps exceed the limit of %d", len(rt.Deps), maxDepsLen)
	}
	ts.Deps = rt.Deps
	if mode == shard.ModeBroadcast {
		switch {
		case rt.Name != "":
			return ts, fieldErr(join(path, "name"), "not allowed in a broadcast: each copy is named by its peer id")
		case rt.Pin != "":
			return ts, fieldErr(join(path, "pin"), "not allowed in a broadcast: each copy is pinned to its peer")
		}
		ts.Name = ""
	}
	return ts, placement(&ts, rt.Require, rt.Pin, path, lim)
}
