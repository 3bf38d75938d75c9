package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// sameAsEncodingJSON fails t unless marshal(v) is json.Marshal(v), bytes
// and error alike.
func sameAsEncodingJSON(t testing.TB, v any) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := marshal(v)
	if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
		t.Fatalf("marshal(%#v)\n = %s (%v)\nwant %s (%v)", v, got, gerr, want, werr)
	}
}

// The values drawn from: empty, plain, and each kind of character
// encoding/json escapes, so that every branch of the encoder is taken.
var (
	allStrs = []string{"", "a", "task-17", "echo", `q"uote`, `back\slash`, "tab\there", "nl\n", "<b>", "a&b", "é", "\u2028", "\xff", "ctl\x01", "us\x1f", "del\x7f", "sp ace"}
	allRaws = []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`1`), json.RawMessage(`{"a":[1,2,{"b":"c"}]}`),
		json.RawMessage(`{ "a" : 1 }`), json.RawMessage("[1,\n2]"), json.RawMessage(`"<x>"`), json.RawMessage(`"a&b"`),
		json.RawMessage("\"\u2028\""), json.RawMessage(`"é"`), json.RawMessage(`"a b"`), json.RawMessage(`{"q":"\"\\"}`)}
	allTimes = []time.Time{
		time.Date(2026, 12, 4, 5, 6, 7, 0, time.UTC),
		time.Date(2026, 12, 4, 5, 6, 7, 123456789, time.UTC),
		time.Date(2026, 12, 4, 5, 6, 7, 120000000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 5, 6, 7, 0, time.FixedZone("x", 3600)),
		time.Date(2026, 12, 4, 5, 6, 7, 0, time.FixedZone("far", 25*3600)),
	}
)

// gen draws tasks and groups; each value, with probability plain, only
// from what the hand-written path writes itself (the first few of each
// list): a group then takes that path, or leaves it for one value.
type gen struct {
	r     *rand.Rand
	plain float64
}

func pick[T any](g *gen, list []T, plain int) T {
	if g.r.Float64() < g.plain {
		list = list[:plain]
	}
	return list[g.r.IntN(len(list))]
}

func (g *gen) str() string          { return pick(g, allStrs, 3) }
func (g *gen) raw() json.RawMessage { return pick(g, allRaws, 4) }
func (g *gen) at() time.Time        { return pick(g, allTimes, 5) }
func (g *gen) intn(n int) int       { return g.r.IntN(n) }
func (g *gen) one(n int) bool       { return g.r.IntN(n) == 0 }

func (g *gen) time() *time.Time {
	if g.one(3) {
		return nil
	}
	t := g.at()
	return &t
}

func (g *gen) strings() []string {
	switch g.intn(3) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	var out []string
	for range 1 + g.intn(3) {
		out = append(out, g.str())
	}
	return out
}

func (g *gen) missing() []int {
	switch g.intn(3) {
	case 0:
		return nil
	case 1:
		return []int{}
	}
	return []int{g.intn(100), g.intn(4096)}
}

func (g *gen) int() *int {
	if g.one(2) {
		return nil
	}
	i := g.intn(5) - 1
	return &i
}

func (g *gen) task() Task {
	t := Task{ID: g.str(), Group: g.str(), Name: g.str(), Handler: g.str(), State: g.str(),
		Priority: int32(g.intn(21) - 10), Attempt: g.intn(3), Round: g.r.Uint64N(5) << (g.intn(2) * 60), Retries: g.intn(2),
		Peer: g.str(), Result: g.raw(), Deps: g.strings(), CreatedAt: g.time(), StartedAt: g.time(),
		FinishedAt: g.time(), NotBefore: g.time(), Stage: g.int(), Item: g.int(), Require: g.strings(),
		Pin: g.str(), Waiting: g.str()}
	if g.one(2) {
		e := g.str()
		t.Error = &e
	}
	if g.one(3) {
		t.WorkerDeaths = &shard.Deaths{Shared: g.intn(4), Alone: g.intn(64)}
	}
	return t
}

func (g *gen) group() Group {
	out := Group{ID: g.str(), Mode: g.str(), State: g.str(), Key: g.str(), Trace: g.str(),
		Total: g.intn(100), CreatedAt: g.time(), FinishedAt: g.time(), TasksOmitted: g.one(4)}
	if g.one(3) {
		out.Concurrency = 1 + g.intn(8)
	}
	if !g.one(8) {
		out.Counts = map[string]int{}
		for range g.intn(4) {
			out.Counts[g.str()] = g.intn(50)
		}
	}
	if !g.one(8) {
		out.Tasks = []Task{}
		for range g.intn(4) {
			out.Tasks = append(out.Tasks, g.task())
		}
	}
	switch g.intn(12) { // a streaming pipeline's parts and a webhook: marshaled by encoding/json
	case 0:
		out.Stages, out.Items = []PipelineStageInfo{{Name: "a", Concurrency: 2, Done: 1}}, 3
	case 1:
		out.Skipped = []SkippedItem{{Item: 1, Stage: "a", Task: "t", Reason: "r"}}
	case 2:
		out.Notify = &NotifyStatus{URL: "http://x", State: "pending"}
	}
	return out
}

// The hand-written encoder writes what encoding/json writes, for every
// field and every kind of value the writer leaves to encoding/json.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast, fastList, fastSub := 0, 0, 0
	for i := range 20000 {
		gn := &gen{r: r, plain: []float64{0, 0.97, 1}[i%3]}
		g := gn.group()
		sameAsEncodingJSON(t, g)
		if _, ok := appendGroup(nil, &g); ok {
			fast++
		}
		sameAsEncodingJSON(t, gn.task())
		tl, gl := TaskList{Cursor: gn.str(), MissingPartitions: gn.missing()}, GroupList{Cursor: gn.str(), MissingPartitions: gn.missing()}
		if !gn.one(8) {
			tl.Tasks, gl.Groups = []Task{}, []Group{}
			for range gn.intn(3) {
				tl.Tasks, gl.Groups = append(tl.Tasks, gn.task()), append(gl.Groups, gn.group())
			}
		}
		sameAsEncodingJSON(t, tl)
		sameAsEncodingJSON(t, gl)
		sub := SubmitGroupResponse{Group: gn.str(), Created: gn.one(2)}
		if !gn.one(8) {
			sub.Tasks = map[string]string{}
			for range gn.intn(4) {
				sub.Tasks[gn.str()] = gn.str()
			}
		}
		sameAsEncodingJSON(t, sub)
		if _, ok := appendSubmitted(nil, &sub); ok && len(sub.Tasks) > 1 {
			fastSub++
		}
		if _, ok := appendList(nil, "groups", gl.Groups, appendGroup, gl.Cursor, gl.MissingPartitions); ok {
			fastList++
		}
	}
	if fastSub < 200 {
		t.Fatalf("only %d of 20,000 submission answers of two tasks or more took the hand-written path", fastSub)
	}
	if fastList < 200 {
		t.Fatalf("only %d of 20,000 lists took the hand-written path", fastList)
	}
	if fast < 200 {
		t.Fatalf("only %d of 20,000 groups took the hand-written path: the test compares encoding/json with itself", fast)
	}
	// What the API writes for a finished W1 group: the hand-written path.
	now := time.Now()
	v := shard.GroupView{ID: "g1", Mode: shard.ModeParallel, State: shard.GroupSucceeded, CreatedAt: now, FinishedAt: now,
		Counts: map[shard.State]int{shard.Succeeded: 2}, Total: 2}
	for i := range 2 {
		v.Tasks = append(v.Tasks, shard.TaskView{ID: shard.TaskID(fmt.Sprintf("g1-%d", i)), Group: "g1", Handler: "echo",
			State: shard.Succeeded, Attempt: 1, Round: 1, Holder: "n1#b", Result: []byte(`{"echo":1}`), CreatedAt: now, StartedAt: now, FinishedAt: now})
	}
	g := NewGroup(v, true)
	if _, ok := appendGroup(nil, &g); !ok {
		t.Fatal("a finished group of echo tasks is left to encoding/json")
	}
	sameAsEncodingJSON(t, g)
}

func FuzzEncodeMatchesEncodingJSON(f *testing.F) {
	f.Add("g1", "echo", []byte(`{"a":1}`), int64(1764800000), 5, "n1")
	f.Add(`<"\`, "\u2028", []byte("[1,\n2]"), int64(-62135596800), -1, "\xff")
	f.Fuzz(func(t *testing.T, id, handler string, result []byte, sec int64, n int, peer string) {
		at := time.Unix(sec, int64(n)).UTC()
		task := Task{ID: id, Group: id, Handler: handler, State: "SUCCEEDED", Attempt: n, Round: uint64(sec), Peer: peer,
			CreatedAt: &at, FinishedAt: &at, Deps: []string{peer}, Stage: &n}
		if json.Valid(result) { // as NewTask leaves it
			task.Result = json.RawMessage(result)
		} else {
			task.Error = &handler
		}
		sameAsEncodingJSON(t, task)
		sameAsEncodingJSON(t, Group{ID: id, Mode: handler, State: peer, Total: n, Counts: map[string]int{peer: n, id: 1},
			Tasks: []Task{task, task}, CreatedAt: &at})
		sameAsEncodingJSON(t, SubmitGroupResponse{Group: id, Tasks: map[string]string{handler: id, peer: handler}})
	})
}

func BenchmarkEncodeGroup(b *testing.B) {
	now := time.Now().UTC()
	g := Group{ID: "g1", Mode: "parallel", State: "SUCCEEDED", Total: 100, Counts: map[string]int{"SUCCEEDED": 100}, CreatedAt: &now, FinishedAt: &now}
	for i := range 100 {
		e := json.RawMessage(fmt.Sprintf(`{"echo":%d}`, i))
		g.Tasks = append(g.Tasks, Task{ID: fmt.Sprintf("g1-%d", i), Group: "g1", Handler: "echo", State: "SUCCEEDED", Attempt: 1,
			Round: 1, Peer: "n1", Result: e, CreatedAt: &now, StartedAt: &now, FinishedAt: &now})
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(g); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("by-hand", func(b *testing.B) {
		for b.Loop() {
			if _, err := marshal(g); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The hand-written sides know every field of what they encode and
// decode: a field added to one of these types must be added to
// encode.go or decode_fast.go, and to the generators above.
func TestHandWrittenKnowEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields int
	}{{Task{}, 23}, {Group{}, 16}, {TaskList{}, 3}, {GroupList{}, 3}, {rawGroupTask{}, 10}, {rawGroupOf[rawGroupTask]{}, 9}, {SubmitGroupResponse{}, 3}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.fields {
			t.Errorf("%T has %d fields, the hand-written encoder or decoder knows %d: teach it the new ones (and the generators), then change this count", c.v, n, c.fields)
		}
	}
}

// TestGroupAnswerSizedOnce: a group's answer fits the allocation marshal
// sizes for it (tasksSize), for tasks as W1's and with every field a
// task may carry, and it is not more than a third over.
func TestGroupAnswerSizedOnce(t *testing.T) {
	at := time.Date(2026, 12, 4, 22, 25, 18, 123456789, time.UTC)
	msg, stage := "exit status 1: boom", 3
	peer := "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo#1764887118"
	full := Task{ID: "g-01JEXAMPLE0000000000000000/t1", Group: "g-01JEXAMPLE0000000000000000", Name: "t1", Handler: "exec",
		State: "FAILED", Priority: -2147483648, Attempt: 999999, Round: 18446744073709551615, Retries: 999999, Peer: peer,
		Error: &msg, Deps: []string{"t0", "a-longer-dependency-name"}, CreatedAt: &at, StartedAt: &at, FinishedAt: &at, NotBefore: &at,
		Stage: &stage, Item: &stage, Require: []string{"gpu=a100", "zone=eu-west-1"}, Pin: peer, Waiting: "no live peer carries gpu=a100"}
	echo := Task{ID: "g-01JEXAMPLE0000000000000000/t2", Group: "g-01JEXAMPLE0000000000000000", Handler: "echo", State: "SUCCEEDED",
		Attempt: 1, Round: 1, Peer: peer, Result: json.RawMessage(`{"w":"w1","rep":0,"i":123456}`), CreatedAt: &at, StartedAt: &at, FinishedAt: &at}
	for _, task := range []Task{full, echo, {ID: "t", Group: "g", Handler: "h", State: "READY"}} {
		g := Group{ID: task.Group, Mode: "parallel", State: "RUNNING", Total: 1000, Counts: map[string]int{"FAILED": 1, "SUCCEEDED": 998, "READY": 1},
			CreatedAt: &at, FinishedAt: &at}
		for range 1000 {
			g.Tasks = append(g.Tasks, task)
		}
		b, err := marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if room := 512 + tasksSize(g.Tasks); len(b) > room || room > len(b)*4/3+512 {
			t.Errorf("%s task: a group's answer of %d bytes in %d sized for it", task.Handler, len(b), room)
		}
	}
}

// A streaming pipeline's stages count the items skipped at each, so that
// done plus the skipped so far is the items a stage is through with.
func TestGroupStagesCountSkipped(t *testing.T) {
	v := shard.GroupView{ID: "g1", Mode: shard.ModeStream, State: shard.GroupRunning, Items: 5,
		Stages: []shard.StageSpec{{Name: "a"}, {Name: "b"}}, StageDone: []int{3, 1},
		Skipped: []shard.SkippedItem{{Item: 1, Stage: "a"}, {Item: 2, Stage: "a"}, {Item: 4, Stage: "b"}}}
	g := NewGroup(v, false)
	if len(g.Stages) != 2 || g.Stages[0].Done != 3 || g.Stages[0].Skipped != 2 || g.Stages[1].Done != 1 || g.Stages[1].Skipped != 1 {
		t.Fatalf("stages = %+v; want a: 3 done 2 skipped, b: 1 done 1 skipped", g.Stages)
	}
	data, err := json.Marshal(g)
	if err != nil || !strings.Contains(string(data), `{"name":"a","concurrency":0,"done":3,"skipped":2}`) {
		t.Fatalf("group = %s, %v", data, err)
	}
}
