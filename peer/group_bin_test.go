package peer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// TestGroupBinWire: a group's read goes as opGroupBin to an owner that
// advertises node.FeatureGroupBin, as opGroup to any other, with the
// same fields.
func TestGroupBinWire(t *testing.T) {
	req := &groupReq{Group: "g1", Wait: time.Second, NoTasks: true}
	for _, c := range []struct {
		features uint64
		op       string
	}{
		{node.Features, opGroupBin},
		{node.Features &^ node.FeatureGroupBin, opGroup},
		{0, opGroup},
	} {
		b, err := encodeCall(wireForm(req, c.features), "00-t")
		if err != nil {
			t.Fatal(err)
		}
		h, err := readHeader(b)
		if err != nil || h.Op != c.op {
			t.Fatalf("features %#x: op %q, %v; want %q", c.features, h.Op, err, c.op)
		}
		var got groupReq
		if err := json.Unmarshal(b, &got); err != nil || got.Group != req.Group || got.Wait != req.Wait || !got.NoTasks || got.Trace != "00-t" {
			t.Fatalf("features %#x: decoded %+v, %v", c.features, got, err)
		}
	}
	if req.head().Op != "" {
		t.Error("encoding changed the request")
	}
}

// TestGroupBinAnswer: served by a peer, a group's binary answer reads as
// the very group its JSON answer does, the API's rendering of it byte for
// byte, for a full read, a summary and an unknown group.
func TestGroupBinAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2})
		ctx := t.Context()
		req := &api.SubmitGroupRequest{Mode: "dag"}
		for i := range 5 {
			gt := api.GroupTask{Name: fmt.Sprint("t", i)}
			gt.Handler, gt.Payload = "echo", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
			if i > 0 {
				gt.Deps = []string{"t0"}
			}
			req.Tasks = append(req.Tasks, gt)
		}
		res, err := mp.c.SubmitGroup(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mp.c.GetGroup(ctx, res.Group, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		ask := func(op string, r groupReq) groupAns {
			t.Helper()
			b, err := encodeCall(&r, "")
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.Replace(b, []byte(`"op":"group"`), []byte(`"op":"`+op+`"`), 1)
			raw, err := mp.p.serveCall(ctx, "other", b)
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			var a groupAns
			if op == opGroupBin {
				err = decodeGroupBin(raw, &a)
			} else {
				err = json.Unmarshal(raw, &a)
			}
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			return a
		}
		for _, r := range []groupReq{
			{Group: shard.GroupID(res.Group)},
			{Group: shard.GroupID(res.Group), NoTasks: true},
			{Group: "gnope"},
		} {
			viaJSON, viaBin := ask(opGroup, r), ask(opGroupBin, r)
			if viaJSON.Err != viaBin.Err || viaJSON.Msg != viaBin.Msg {
				t.Fatalf("%+v: errors %q/%q against %q/%q", r, viaBin.Err, viaBin.Msg, viaJSON.Err, viaJSON.Msg)
			}
			if (r.Group == "gnope") != (viaBin.Err == "not_found") {
				t.Fatalf("%+v: error %q", r, viaBin.Err)
			}
			if (viaJSON.Group == nil) != (viaBin.Group == nil) {
				t.Fatalf("%+v: group %v against %v", r, viaBin.Group, viaJSON.Group)
			}
			if viaJSON.Group == nil || viaBin.Err != "" {
				continue
			}
			if (viaJSON.Group.Tasks == nil) != (viaBin.Group.Tasks == nil) || len(viaBin.Group.Tasks) != len(viaJSON.Group.Tasks) {
				t.Fatalf("%+v: %d tasks (nil %v) against %d", r, len(viaBin.Group.Tasks), viaBin.Group.Tasks == nil, len(viaJSON.Group.Tasks))
			}
			want, _ := json.Marshal(api.NewGroup(*viaJSON.Group, !r.NoTasks))
			got, _ := json.Marshal(api.NewGroup(*viaBin.Group, !r.NoTasks))
			if !bytes.Equal(got, want) {
				t.Fatalf("%+v: rendered\n%s\nagainst\n%s", r, got, want)
			}
			if !r.NoTasks && (len(viaBin.Group.Tasks) != 5 || viaBin.Group.Tasks[1].Deps[0] != viaJSON.Group.Tasks[0].ID) {
				t.Fatalf("tasks %+v", viaBin.Group.Tasks)
			}
		}
	})
}

// TestGroupBinRefused: an answer that is not what encodeGroupBin writes is
// an error naming what is wrong, never a group with tasks missing.
func TestGroupBinRefused(t *testing.T) {
	good, err := encodeGroupBin(&groupAns{Group: &shard.GroupView{ID: "g", Tasks: []shard.TaskView{{ID: "g.0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := bytes.Cut(good, []byte{'\n'})
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no task list", head, "without its task list"},
		{"no marker", append(append([]byte{}, head...), '\n'), "without its task list"},
		{"bad marker", append(append([]byte{}, head...), '\n', 7), "marker 7"},
		{"bytes after a summary", append(append([]byte{}, head...), '\n', 0, 0), "after its end"},
		{"truncated tasks", good[:len(good)-2], "group answer"},
		{"bytes after the tasks", append(append([]byte{}, good...), 0), "after its task list"},
		{"tasks without a group", append([]byte(`{}`+"\n"), good[len(head)+1:]...), "without a group"},
		{"bad JSON", append([]byte(`{"group":7}`+"\n"), 0), "cannot unmarshal"},
	} {
		var a groupAns
		if err := decodeGroupBin(c.b, &a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: decodeGroupBin = %v; want an error naming %q", c.name, err, c.want)
		}
	}
}

// FuzzDecodeGroupBin: decoding any bytes returns an answer or an error,
// never panics, and what decodes re-encodes to the same answer.
func FuzzDecodeGroupBin(f *testing.F) {
	for _, a := range []*groupAns{
		{Group: &shard.GroupView{ID: "g", Tasks: []shard.TaskView{{ID: "g.0", Handler: "echo", Result: []byte("1")}}}},
		{Group: &shard.GroupView{ID: "g"}},
		{rpcError: rpcError{Err: "not_found", Msg: "no group"}},
	} {
		b, err := encodeGroupBin(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a groupAns
		if err := decodeGroupBin(b, &a); err != nil {
			return
		}
		again, err := encodeGroupBin(&a)
		if err != nil {
			t.Fatal(err)
		}
		var b2 groupAns
		if err := decodeGroupBin(again, &b2); err != nil {
			t.Fatalf("re-encoded answer: %v", err)
		}
		if (a.Group == nil) != (b2.Group == nil) || a.Group != nil && len(a.Group.Tasks) != len(b2.Group.Tasks) {
			t.Fatalf("re-decoded %+v; want %+v", b2, a)
		}
	})
}

// TestGroupBinDeaths: the tasks' worker deaths, which the binary task
// views do not hold, cross in the answer's head.
func TestGroupBinDeaths(t *testing.T) {
	g := shard.GroupView{ID: "g", Tasks: []shard.TaskView{{ID: "g.0", Group: "g"},
		{ID: "g.1", Group: "g", Deaths: shard.Deaths{Shared: 1, Alone: 2}}, {ID: "g.2", Group: "g"}}}
	b, err := encodeGroupBin(&groupAns{Group: &g})
	if err != nil {
		t.Fatal(err)
	}
	var a groupAns
	if err := decodeGroupBin(b, &a); err != nil {
		t.Fatal(err)
	}
	for i, tv := range a.Group.Tasks {
		if tv.Deaths != g.Tasks[i].Deaths {
			t.Errorf("task %s deaths %+v; want %+v", tv.ID, tv.Deaths, g.Tasks[i].Deaths)
		}
	}
	if a.Deaths != nil {
		t.Errorf("answer keeps its deaths map %v after decoding", a.Deaths)
	}
}
