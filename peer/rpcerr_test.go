package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// roundTrip sends err across the mesh as a forwarded request's answer does
// and returns what the forwarding peer gets.
func roundTrip(t *testing.T, err error) error {
	t.Helper()
	var r rpcError
	r.set(err)
	b, jerr := json.Marshal(r)
	if jerr != nil {
		t.Fatal(jerr)
	}
	var back rpcError
	if jerr := json.Unmarshal(b, &back); jerr != nil {
		t.Fatal(jerr)
	}
	return back.err()
}

// errorKinds holds an error of every kind of the vocabulary, as an owner
// returns it, with the answer the edge writes for it.
var errorKinds = []struct {
	name   string
	err    error
	status int
	code   string
	field  string
	is     error // a sentinel the error matches, on both sides
}{
	{"field of a task", &shard.FieldError{Task: 3, Field: "deps", Message: "cycle"}, 400, api.CodeInvalidArgument, "tasks[3].deps", nil},
	{"field of a group", &shard.FieldError{Task: -1, Field: "tasks", Message: "empty"}, 400, api.CodeInvalidArgument, "tasks", nil},
	{"api field", &api.FieldError{Field: "retry.backoff", Message: "negative"}, 400, api.CodeInvalidArgument, "retry.backoff", nil},
	{"malformed", &api.FieldError{Message: "not JSON"}, 400, api.CodeInvalidArgument, "", nil},
	{"not found", fmt.Errorf("task g.1: %w", shard.ErrNotFound), 404, api.CodeNotFound, "", shard.ErrNotFound},
	{"conflict on a field", &shard.ConflictError{Field: "key", Message: "used with another body"}, 409, api.CodeConflict, "key", nil},
	{"conflict", fmt.Errorf("%w: busy", api.ErrConflict), 409, api.CodeConflict, "", api.ErrConflict},
	{"not retryable", fmt.Errorf("%w: g.1 is SUCCEEDED", shard.ErrNotRetryable), 409, api.CodeConflict, "", api.ErrConflict},
	{"lease lost", fmt.Errorf("%w: lease x ran out", api.ErrLeaseLost), 409, api.CodeLeaseLost, "", api.ErrLeaseLost},
	{"unavailable", fmt.Errorf("%w: no owner", api.ErrUnavailable), 503, api.CodeUnavailable, "", api.ErrUnavailable},
	{"node unavailable", node.ErrUnavailable, 503, api.CodeUnavailable, "", api.ErrUnavailable},
	{"node stopped", node.ErrStopped, 503, api.CodeUnavailable, "", api.ErrUnavailable},
	{"deadline", context.DeadlineExceeded, 503, api.CodeUnavailable, "", nil},
	{"too large", &api.FieldError{Field: "tasks[0].payload", Message: "too big", Err: api.ErrPayloadTooLarge}, 413, api.CodePayloadTooLarge, "tasks[0].payload", api.ErrPayloadTooLarge},
	{"internal", errors.New("disk on fire"), 500, api.CodeInternal, "", nil},
}

// TestErrorRoundTrip: an error of every kind crosses the mesh keeping its
// status, code, field and message, and matches the same sentinels.
func TestErrorRoundTrip(t *testing.T) {
	for _, k := range errorKinds {
		t.Run(k.name, func(t *testing.T) {
			here := api.ErrorOf(mapErr(k.err))
			if here.Status != k.status || here.Code != k.code || here.Field != k.field {
				t.Fatalf("local = %d %s %q; want %d %s %q", here.Status, here.Code, here.Field, k.status, k.code, k.field)
			}
			got := roundTrip(t, k.err)
			there := api.ErrorOf(got)
			if *there != *here {
				t.Errorf("forwarded = %+v; want %+v", there, here)
			}
			if k.is != nil && !errors.Is(got, k.is) {
				t.Errorf("forwarded %v does not match %v", got, k.is)
			}
		})
	}
	if err := roundTrip(t, nil); err != nil {
		t.Errorf("no error forwarded = %v; want nil", err)
	}
}

// previousDecode is the previous release's reading of an answer's error
// (rpcResponse.err before the codes), kept to show that it still reads
// this release's answers as the same kind.
func previousDecode(kind, msg string, field *shard.FieldError) error {
	switch kind {
	case "":
		return nil
	case "not_found":
		return shard.ErrNotFound
	case "unavailable":
		return fmt.Errorf("%w: %s", api.ErrUnavailable, msg)
	case "invalid":
		if field != nil {
			return field
		}
	case "conflict":
		if field != nil {
			return &shard.ConflictError{Field: field.Field, Message: field.Message}
		}
		return fmt.Errorf("%w: %s", api.ErrConflict, msg)
	}
	return errors.New(msg)
}

// TestErrorPreviousRelease: a peer of the previous release reads this
// release's answers as the same status and field, and this release reads
// the answers of that one (its kinds, without codes) the way it did.
func TestErrorPreviousRelease(t *testing.T) {
	for _, k := range errorKinds {
		var r rpcError
		r.set(k.err)
		old := api.ErrorOf(previousDecode(r.Err, r.Msg, r.Field))
		status := k.status
		if k.code == api.CodePayloadTooLarge {
			status = http.StatusBadRequest // the previous release has no 413 across the mesh
		}
		if old.Status != status || old.Field != k.field {
			t.Errorf("%s: the previous release reads %d %q; want %d %q", k.name, old.Status, old.Field, status, k.field)
		}
	}
	for _, c := range []struct {
		answer string
		want   api.Error
	}{
		{`{"err":"not_found","msg":"shard: not found"}`, api.Error{Status: 404, Code: api.CodeNotFound, Message: "shard: not found"}},
		{`{"err":"unavailable","msg":"api: unavailable"}`, api.Error{Status: 503, Code: api.CodeUnavailable, Message: "api: unavailable"}},
		{`{"err":"invalid","msg":"tasks[2].deps: cycle","field":{"Task":2,"Field":"deps","Message":"cycle"}}`,
			api.Error{Status: 400, Code: api.CodeInvalidArgument, Message: "tasks[2].deps: cycle", Field: "tasks[2].deps"}},
		{`{"err":"conflict","msg":"key: used","field":{"Task":-1,"Field":"key","Message":"used"}}`,
			api.Error{Status: 409, Code: api.CodeConflict, Message: "key: used", Field: "key"}},
		{`{"err":"conflict","msg":"g.1 is SUCCEEDED"}`, api.Error{Status: 409, Code: api.CodeConflict, Message: "g.1 is SUCCEEDED"}},
		{`{"err":"internal","msg":"disk on fire"}`, api.Error{Status: 500, Code: api.CodeInternal, Message: "disk on fire"}},
		{`{"err":"something new","msg":"?"}`, api.Error{Status: 500, Code: api.CodeInternal, Message: "?"}},
	} {
		var r rpcError
		if err := json.Unmarshal([]byte(c.answer), &r); err != nil {
			t.Fatal(err)
		}
		if got := api.ErrorOf(r.err()); *got != c.want {
			t.Errorf("%s = %+v; want %+v", c.answer, *got, c.want)
		}
	}
}
