package peer

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// submitSpecFull returns a spec with every field set.
func submitSpecFull() *shard.GroupSpec {
	return &shard.GroupSpec{
		ID: "g-7f3a", Mode: shard.ModeDAG, Key: "idem-1", Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Tasks: []shard.TaskSpec{
			{Name: "a", Handler: "resize", Payload: []byte(`{"w":1}`), Priority: -3,
				Timeout: 30 * time.Second, Retry: shard.Retry{MaxAttempts: 5, Backoff: time.Second, MaxBackoff: time.Minute},
				Delay: -time.Millisecond},
			{Name: "b\n\"x\"", Handler: "resize", Payload: []byte{0, '\n', 255}, Priority: math.MaxInt32,
				Timeout: 1, Retry: shard.Retry{MaxAttempts: math.MaxInt, Backoff: math.MinInt64, MaxBackoff: math.MaxInt64},
				Delay: time.Hour, Deps: []string{"a", "ü"}, Stage: 3,
				Item: math.MaxInt32, Require: []string{"gpu=true", "zone=a"}, Pin: "12D3KooWPin"},
		},
		Notify: "https://hooks.example/needle",
		Stages: []shard.StageSpec{{Name: "parse", Concurrency: 4}, {Name: "load"}},
	}
}

// TestSubmitSpecWire: a submission to an owner that advertises
// FeatureSubmitSpec goes in binary and decodes to the very spec, wait and
// trace; to one that does not, and for any other request, the wire is
// the JSON of before.
func TestSubmitSpecWire(t *testing.T) {
	spec := submitSpecFull()
	req := &submitReq{Spec: spec, Wait: 3 * time.Second}
	sent := wireForm(req, node.Features)
	if sent.op() != opSubmitSpec {
		t.Fatalf("wireForm(submit, Features).op() = %q; want %q", sent.op(), opSubmitSpec)
	}
	if _, ok := sent.(spanned); !ok {
		t.Error("the binary submission is not a span of its trace")
	}
	b, err := encodeCall(sent, "00-trace")
	if err != nil {
		t.Fatal(err)
	}
	if hd, err := readHeader(b); err != nil || hd.Op != opSubmitSpec || hd.V != rpcVersion {
		t.Fatalf("readHeader = %+v, %v", hd, err)
	}
	if _, ok := callServers[opSubmitSpec]; !ok {
		t.Fatalf("no server for op %s", opSubmitSpec)
	}
	got, err := decodeSubmitSpec(b)
	if err != nil {
		t.Fatalf("decodeSubmitSpec: %v", err)
	}
	if !reflect.DeepEqual(got.Spec, spec) {
		t.Errorf("spec decoded as\n%+v\nsent\n%+v", got.Spec, spec)
	}
	if got.Wait != req.Wait || got.Trace != "00-trace" {
		t.Errorf("decoded wait %v trace %q; want %v, 00-trace", got.Wait, got.Trace, req.Wait)
	}
	if req.head().Op != "" || req.Spec != spec {
		t.Error("encoding changed the request")
	}

	for _, c := range []struct {
		name     string
		req      meshReq
		features uint64
	}{
		{"an older owner", req, node.Features &^ node.FeatureSubmitSpec},
		{"an unknown owner", req, 0},
		{"an unknown mode", &submitReq{Spec: &shard.GroupSpec{ID: "g", Mode: 99}}, node.Features},
		{"no spec", &submitReq{}, node.Features},
		{"another op", &taskReq{Task: "g1.0"}, node.Features},
	} {
		if got := wireForm(c.req, c.features); got != c.req {
			t.Errorf("%s: wireForm = %T (op %s); want the request itself", c.name, got, got.op())
		}
	}
}

// TestSubmitSpecRefused: a malformed binary submission is an error, never
// a panic nor a spec.
func TestSubmitSpecRefused(t *testing.T) {
	good, err := encodeCall(wireForm(&submitReq{Spec: submitSpecFull()}, node.Features), "")
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := bytes.Cut(good, []byte{'\n'})
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no spec", head, "without a spec"},
		{"bad fields", append([]byte(`{"v":1,"op":"submit_spec","wait":"x"}`), good[len(head):]...), "submit_spec"},
		{"truncated spec", good[:len(good)-3], "submit_spec"},
		{"bytes after the spec", append(append([]byte{}, good...), 0), "after the spec"},
		{"empty spec", append(append([]byte{}, head...), '\n'), "submit_spec"},
	} {
		r, err := decodeSubmitSpec(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: decodeSubmitSpec = %v, %v; want an error naming %q", c.name, r, err, c.want)
		}
	}
}

// FuzzDecodeSubmitSpec: decoding any bytes returns a request with a spec
// or an error, and never panics.
func FuzzDecodeSubmitSpec(f *testing.F) {
	for _, spec := range []*shard.GroupSpec{submitSpecFull(), {ID: "g", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "echo"}}}} {
		b, err := encodeCall(wireForm(&submitReq{Spec: spec, Wait: time.Second}, node.Features), "00-t")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeSubmitSpec(b)
		if (err == nil) != (r != nil && r.Spec != nil) {
			t.Fatalf("decodeSubmitSpec = %v, %v", r, err)
		}
		if err != nil {
			return
		}
		// What decodes re-encodes to what decodes the same.
		again, err := decodeSubmitSpec(shard.AppendGroupSpec(append(mustJSON(map[string]any{"v": 1}), '\n'), r.Spec))
		if err != nil || !reflect.DeepEqual(again.Spec, r.Spec) {
			t.Fatalf("re-encoded spec decodes as %+v, %v; want %+v", again, err, r.Spec)
		}
	})
}

// BenchmarkForwardSubmitSpec is BenchmarkForwardSubmit's "typed" in the
// binary form: encode, header, decode.
func BenchmarkForwardSubmitSpec(b *testing.B) {
	spec := &shard.GroupSpec{ID: "g1", Mode: shard.ModeParallel, Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for i := range 100 {
		spec.Tasks = append(spec.Tasks, shard.TaskSpec{Name: fmt.Sprint("t", i), Handler: "echo", Payload: []byte(`{"n":12345,"s":"some payload text"}`)})
	}
	for b.Loop() {
		data, _ := encodeCall(wireForm(&submitReq{Spec: spec}, node.Features), spec.Trace)
		h, err := readHeader(data)
		if err != nil || h.Op != opSubmitSpec {
			b.Fatal(err)
		}
		if _, err := decodeSubmitSpec(data); err != nil {
			b.Fatal(err)
		}
	}
}
