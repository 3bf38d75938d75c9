package api

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// A waiting client's answer is a group of finished tasks, and encoding it
// with encoding/json (reflection, then a validating pass over every
// task's result) was an eighth of a peer's CPU under W1. appendGroup and
// appendTask write the same bytes by hand for what groups and tasks
// usually hold, and leave the rest to encoding/json: each reports false
// for what it does not write the way encoding/json does (a string that
// needs escaping, a result that needs compacting, a time outside years
// 0-9999, a streaming pipeline's stages, a webhook), and the caller
// marshals the value instead. TestEncodeMatchesEncodingJSON and
// FuzzEncodeMatchesEncodingJSON hold the two to the same bytes.

// marshal returns v's JSON as json.Marshal does, faster for a Group, a
// Task and the pages of their lists. A task's result must be valid JSON, as NewTask leaves it (it
// drops one that is not): it is written as it is.
func marshal(v any) ([]byte, error) {
	var (
		b  []byte
		ok bool
	)
	switch v := v.(type) {
	case Group:
		b, ok = appendGroup(make([]byte, 0, 512+tasksSize(v.Tasks)), &v)
	case Task:
		b, ok = appendTask(make([]byte, 0, 512), &v)
	case TaskList:
		b, ok = appendList(make([]byte, 0, 64+tasksSize(v.Tasks)), "tasks", v.Tasks, appendTask, v.Cursor, v.MissingPartitions)
	case SubmitGroupResponse:
		b, ok = appendSubmitted(make([]byte, 0, 32+len(v.Group)+len(v.Tasks)*(8+len(v.Group)+24)), &v)
	case GroupList:
		b, ok = appendList(make([]byte, 0, 64+300*len(v.Groups)), "groups", v.Groups, appendGroup, v.Cursor, v.MissingPartitions)
	}
	if ok {
		return b, nil
	}
	return json.Marshal(v)
}

// tasksSize bounds the length of ts in JSON as appendTask writes it: a
// group's answer is written into one allocation of that size, where a
// guess per task had most groups' answers doubled, and copied, on the
// way (a tenth of a peer's CPU under W1 went to encoding answers).
func tasksSize(ts []Task) int {
	n := 0
	for i := range ts {
		n += taskSize(&ts[i])
	}
	return n
}

// taskJSONBase is what a task's JSON takes besides its strings, times,
// result, error and optional fields: the keys, the quotes and the widest
// numbers.
const taskJSONBase = 200

func taskSize(t *Task) int {
	n := taskJSONBase + len(t.ID) + len(t.Group) + len(t.Handler) + len(t.State) + len(t.Peer)
	for _, at := range []*time.Time{t.CreatedAt, t.StartedAt, t.FinishedAt} {
		n += timeSize(at)
	}
	n += max(len(t.Result), 4)
	if t.Error != nil {
		n += 2 + len(*t.Error)
	} else {
		n += 4
	}
	if t.Name != "" {
		n += 9 + len(t.Name)
	}
	if t.Retries != 0 {
		n += 31
	}
	if t.Deps != nil {
		n += 9 + stringsSize(t.Deps)
	}
	if t.NotBefore != nil {
		n += 15 + timeSize(t.NotBefore)
	}
	if t.Stage != nil {
		n += 30
	}
	if t.Item != nil {
		n += 29
	}
	if t.Require != nil {
		n += 12 + stringsSize(t.Require)
	}
	if t.Pin != "" {
		n += 9 + len(t.Pin)
	}
	if t.Waiting != "" {
		n += 13 + len(t.Waiting)
	}
	if t.WorkerDeaths != nil {
		n += 60
	}
	return n
}

// timeSize is the length of a time in JSON: quoted RFC 3339 with
// nanoseconds in UTC (appendTime), or null.
func timeSize(t *time.Time) int {
	if t == nil {
		return 4
	}
	return 32
}

func stringsSize(ss []string) int {
	n := 2
	for _, s := range ss {
		n += 3 + len(s)
	}
	return n
}

// appendSubmitted appends a group's submission answer: its task ids by
// name, in the order of the names, as encoding/json writes a map. A
// 1,000-task group's answer by encoding/json (reflection, and a sort of
// reflected keys) was 2.4% of the peers' CPU under W1 at 3 peers.
func appendSubmitted(b []byte, r *SubmitGroupResponse) ([]byte, bool) {
	ok := true
	b = append(b, `{"group":`...)
	b, ok = appendString(b, r.Group, ok)
	b = append(b, `,"tasks":`...)
	if r.Tasks == nil {
		return append(b, "null}"...), ok
	}
	names := make([]string, 0, len(r.Tasks))
	for name := range r.Tasks {
		names = append(names, name)
	}
	slices.Sort(names)
	b = append(b, '{')
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendString(b, name, ok)
		b = append(b, ':')
		b, ok = appendString(b, r.Tasks[name], ok)
	}
	return append(b, "}}"...), ok
}

// appendList appends a page of a list (TaskList, GroupList): its items
// under key, each by appendItem, then its cursor and missing partitions.
func appendList[T any](b []byte, key string, items []T, appendItem func([]byte, *T) ([]byte, bool), cursor string, missing []int) ([]byte, bool) {
	b = append(append(append(b, `{"`...), key...), `":`...)
	b, ok := appendArray(b, items, appendItem)
	if cursor != "" {
		b = append(b, `,"cursor":`...)
		b, ok = appendString(b, cursor, ok)
	}
	if len(missing) > 0 {
		b = append(b, `,"missing_partitions":[`...)
		for i, p := range missing {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(p), 10)
		}
		b = append(b, ']')
	}
	return append(b, '}'), ok
}

// appendArray appends items, each by appendItem, as a JSON array (null
// for nil, as encoding/json writes a nil slice).
func appendArray[T any](b []byte, items []T, appendItem func([]byte, *T) ([]byte, bool)) ([]byte, bool) {
	if items == nil {
		return append(b, "null"...), true
	}
	ok := true
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		var iok bool
		b, iok = appendItem(b, &items[i])
		ok = ok && iok
	}
	return append(b, ']'), ok
}

func appendGroup(b []byte, g *Group) ([]byte, bool) {
	if g.Stages != nil || g.Items != 0 || g.Skipped != nil || g.Notify != nil || g.Counts == nil {
		return b, false
	}
	ok := true
	b = append(b, `{"id":`...)
	b, ok = appendString(b, g.ID, ok)
	b = append(b, `,"mode":`...)
	b, ok = appendString(b, g.Mode, ok)
	b = append(b, `,"state":`...)
	b, ok = appendString(b, g.State, ok)
	if g.Key != "" {
		b = append(b, `,"key":`...)
		b, ok = appendString(b, g.Key, ok)
	}
	if g.Trace != "" {
		b = append(b, `,"trace":`...)
		b, ok = appendString(b, g.Trace, ok)
	}
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(g.Total), 10)
	b = append(b, `,"counts":{`...)
	keys := make([]string, 0, len(g.Counts))
	for k := range g.Counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendString(b, k, ok)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(g.Counts[k]), 10)
	}
	b = append(b, `},"tasks":`...)
	var tok bool
	b, tok = appendArray(b, g.Tasks, appendTask)
	ok = ok && tok
	b = append(b, `,"created_at":`...)
	b, ok = appendTime(b, g.CreatedAt, ok)
	b = append(b, `,"finished_at":`...)
	b, ok = appendTime(b, g.FinishedAt, ok)
	if g.TasksOmitted {
		b = append(b, `,"tasks_omitted":true`...)
	}
	if g.Concurrency != 0 {
		b = append(b, `,"concurrency":`...)
		b = strconv.AppendInt(b, int64(g.Concurrency), 10)
	}
	return append(b, '}'), ok
}

func appendTask(b []byte, t *Task) ([]byte, bool) {
	ok := true
	b = append(b, `{"id":`...)
	b, ok = appendString(b, t.ID, ok)
	b = append(b, `,"group":`...)
	b, ok = appendString(b, t.Group, ok)
	if t.Name != "" {
		b = append(b, `,"name":`...)
		b, ok = appendString(b, t.Name, ok)
	}
	b = append(b, `,"handler":`...)
	b, ok = appendString(b, t.Handler, ok)
	b = append(b, `,"state":`...)
	b, ok = appendString(b, t.State, ok)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(t.Attempt), 10)
	b = append(b, `,"round":`...)
	b = strconv.AppendUint(b, t.Round, 10)
	if t.Retries != 0 {
		b = append(b, `,"retries":`...)
		b = strconv.AppendInt(b, int64(t.Retries), 10)
	}
	b = append(b, `,"peer":`...)
	b, ok = appendString(b, t.Peer, ok)
	b = append(b, `,"result":`...)
	if t.Result == nil {
		b = append(b, "null"...)
	} else if plainJSON(t.Result) {
		b = append(b, t.Result...)
	} else {
		ok = false // whitespace to drop, or characters to escape: json.Marshal compacts it
	}
	b = append(b, `,"error":`...)
	if t.Error == nil {
		b = append(b, "null"...)
	} else {
		b, ok = appendString(b, *t.Error, ok)
	}
	if len(t.Deps) > 0 {
		b = append(b, `,"deps":`...)
		b, ok = appendStrings(b, t.Deps, ok)
	}
	b = append(b, `,"created_at":`...)
	b, ok = appendTime(b, t.CreatedAt, ok)
	b = append(b, `,"started_at":`...)
	b, ok = appendTime(b, t.StartedAt, ok)
	b = append(b, `,"finished_at":`...)
	b, ok = appendTime(b, t.FinishedAt, ok)
	if t.NotBefore != nil {
		b = append(b, `,"not_before":`...)
		b, ok = appendTime(b, t.NotBefore, ok)
	}
	if t.Stage != nil {
		b = append(b, `,"stage":`...)
		b = strconv.AppendInt(b, int64(*t.Stage), 10)
	}
	if t.Item != nil {
		b = append(b, `,"item":`...)
		b = strconv.AppendInt(b, int64(*t.Item), 10)
	}
	if len(t.Require) > 0 {
		b = append(b, `,"require":`...)
		b, ok = appendStrings(b, t.Require, ok)
	}
	if t.Pin != "" {
		b = append(b, `,"pin":`...)
		b, ok = appendString(b, t.Pin, ok)
	}
	if t.Waiting != "" {
		b = append(b, `,"waiting":`...)
		b, ok = appendString(b, t.Waiting, ok)
	}
	if d := t.WorkerDeaths; d != nil {
		b = append(b, `,"worker_deaths":{"shared":`...)
		b = strconv.AppendInt(b, int64(d.Shared), 10)
		b = append(b, `,"alone":`...)
		b = strconv.AppendInt(b, int64(d.Alone), 10)
		b = append(b, '}')
	}
	return append(b, '}'), ok
}

// appendString appends s quoted; ok becomes false when s holds a byte
// encoding/json escapes (a quote, a backslash, a control character, <, >,
// &) or anything but ASCII.
func appendString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			ok = false
			break
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

func appendStrings(b []byte, ss []string, ok bool) ([]byte, bool) {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendString(b, s, ok)
	}
	return append(b, ']'), ok
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted), or null; ok becomes false for a time not in UTC
// (the wire's are: timePtr) or in a year outside 0-9999, which
// MarshalJSON refuses.
func appendTime(b []byte, t *time.Time, ok bool) ([]byte, bool) {
	if t == nil {
		return append(b, "null"...), ok
	}
	if y := t.Year(); y < 0 || y > 9999 || t.Location() != time.UTC {
		ok = false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}

// plainJSON reports whether raw, valid JSON, is what encoding/json writes
// for it: no whitespace to drop and nothing it escapes for HTML (<, >, &,
// U+2028, U+2029, whose UTF-8 starts with 0xE2).
func plainJSON(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}
