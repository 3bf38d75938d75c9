package shard

import "encoding/binary"

// A group's task views cross the mesh when a peer that does not own the
// group answers a read of it (peer/calls.go): as JSON, a 1,000-task
// group's views took encoding/json's reflection on the owner and a parse
// of every byte on the reader, 7% of a 3-peer mesh's CPU under W1.
// AppendTaskViews writes them with the log's primitives instead, and
// DecodeTaskViews reads them with the log's Decoder: it never panics, and
// checks every length and count against the input before allocating.
//
// What survives the trip is what JSON's did: every field's value, times
// as instants in UTC. An empty slice (Payload, Result, Deps, Require)
// decodes as nil.

// minTaskViewSize is the fewest bytes a task view takes: one per field.
const minTaskViewSize = 24

// AppendTaskViews appends vs as DecodeTaskViews reads them.
func AppendTaskViews(dst []byte, vs []TaskView) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	for i := range vs {
		dst = appendTaskView(dst, &vs[i])
	}
	return dst
}

func appendTaskView(dst []byte, v *TaskView) []byte {
	dst = AppendString(dst, string(v.ID))
	dst = AppendString(dst, string(v.Group))
	dst = AppendString(dst, v.Name)
	dst = AppendString(dst, v.Handler)
	dst = AppendBytes(dst, v.Payload)
	dst = binary.AppendVarint(dst, int64(v.Priority))
	dst = append(dst, byte(v.State))
	dst = binary.AppendVarint(dst, int64(v.Attempt))
	dst = binary.AppendVarint(dst, int64(v.Retries))
	dst = binary.AppendUvarint(dst, uint64(v.Round))
	dst = AppendString(dst, v.Holder)
	dst = AppendBytes(dst, v.Result)
	dst = AppendString(dst, v.Error)
	dst = binary.AppendUvarint(dst, uint64(len(v.Deps)))
	for _, d := range v.Deps {
		dst = AppendString(dst, string(d))
	}
	dst = AppendTime(dst, v.CreatedAt)
	dst = AppendTime(dst, v.StartedAt)
	dst = AppendTime(dst, v.FinishedAt)
	dst = AppendTime(dst, v.NotBefore)
	dst = append(dst, byte(v.Mode))
	dst = binary.AppendVarint(dst, int64(v.Stage))
	dst = binary.AppendVarint(dst, int64(v.Item))
	dst = binary.AppendUvarint(dst, uint64(len(v.Require)))
	for _, kv := range v.Require {
		dst = AppendString(dst, kv)
	}
	dst = AppendString(dst, v.Pin)
	return AppendString(dst, v.Waiting)
}

// DecodeTaskViews decodes views written by AppendTaskViews at the start of
// p and returns them with the number of bytes they took. An empty list
// decodes as a non-nil empty slice.
func DecodeTaskViews(p []byte) ([]TaskView, int, error) {
	d := NewDecoder(p)
	n := d.Count(minTaskViewSize)
	if !d.Field("tasks") {
		return nil, 0, d.err
	}
	vs := make([]TaskView, n)
	prev := &TaskView{}
	for i := range vs {
		decodeTaskView(&d, &vs[i], prev)
		if d.err != nil {
			d.withinIndex("tasks", i)
			return nil, 0, d.err
		}
		prev = &vs[i]
	}
	return vs, len(p) - d.Len(), nil
}

// decodeTaskView reads one view; strings that repeat from the view before
// (prev: its group, handler, holder) are shared, not copied again.
func decodeTaskView(d *Decoder, v, prev *TaskView) {
	v.ID = TaskID(d.String())
	d.Field("id")
	v.Group = GroupID(d.StringReuse(string(prev.Group)))
	d.Field("group")
	v.Name = d.String()
	d.Field("name")
	v.Handler = d.StringReuse(prev.Handler)
	d.Field("handler")
	v.Payload = d.Bytes()
	d.Field("payload")
	v.Priority = d.int32()
	d.Field("priority")
	v.State = State(d.Byte())
	d.Field("state")
	v.Attempt = d.Int()
	d.Field("attempt")
	v.Retries = d.Int()
	d.Field("retries")
	v.Round = Round(d.Uvarint())
	d.Field("round")
	v.Holder = d.StringReuse(prev.Holder)
	d.Field("holder")
	v.Result = d.Bytes()
	d.Field("result")
	v.Error = d.String()
	d.Field("error")
	if n := d.Count(minStringSize); d.Field("deps") && n > 0 {
		v.Deps = make([]TaskID, n)
		for i := range v.Deps {
			v.Deps[i] = TaskID(d.String())
		}
		d.Field("deps")
	}
	v.CreatedAt = d.Time()
	d.Field("created_at")
	v.StartedAt = d.Time()
	d.Field("started_at")
	v.FinishedAt = d.Time()
	d.Field("finished_at")
	v.NotBefore = d.Time()
	d.Field("not_before")
	v.Mode = Mode(d.Byte())
	d.Field("mode")
	v.Stage = d.Int()
	d.Field("stage")
	v.Item = d.Int()
	d.Field("item")
	v.Require = decodeStrings(d, "require")
	v.Pin = d.StringReuse(prev.Pin)
	d.Field("pin")
	v.Waiting = d.String()
	d.Field("waiting")
}
