package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// fullTaskView has every field set.
func fullTaskView() TaskView {
	at := time.Date(2026, 12, 5, 4, 0, 0, 123456789, time.UTC)
	return TaskView{
		ID: "g-1/a", Group: "g-1", Name: "a", Handler: "echo", Payload: []byte(`{"x":1}`),
		Priority: -7, State: Succeeded, Attempt: 3, Retries: 2, Round: 1 << 40, Holder: "peer-1/0",
		Result: []byte(`"ok"`), Error: "an error", Deps: []TaskID{"g-1/b", "g-1/c"},
		CreatedAt: at, StartedAt: at.Add(time.Millisecond), FinishedAt: at.Add(time.Second),
		NotBefore: at.Add(-time.Hour), Mode: ModeStream, Stage: 2, Item: 9,
		Require: []string{"gpu=1", "zone=a"}, Pin: "peer-2", Waiting: "no peer carries gpu=1",
	}
}

// randTaskViews returns n views of one group, as a group's read has them.
func randTaskViews(r *rand.Rand, n int) []TaskView {
	// Valid UTF-8 (JSON, the reference below, replaces invalid bytes
	// where the binary form keeps them).
	str := func(max int) string {
		rs := make([]rune, r.IntN(max+1))
		for i := range rs {
			rs[i] = rune(r.IntN(0x800))
		}
		return string(rs)
	}
	tm := func() time.Time {
		if r.IntN(3) == 0 {
			return time.Time{}
		}
		return time.Unix(0, r.Int64N(1<<62)).UTC()
	}
	vs := make([]TaskView, n)
	for i := range vs {
		v := &vs[i]
		v.Group, v.Handler, v.Holder, v.Pin = "g-r", "sleep", "peer-"+strconv.Itoa(r.IntN(3)), str(2)
		v.ID, v.Name = TaskID("g-r/"+strconv.Itoa(i)), strconv.Itoa(i)
		if r.IntN(2) == 0 {
			v.Payload = []byte(str(20))
		}
		if r.IntN(2) == 0 {
			v.Result = []byte(str(20))
		}
		v.Priority, v.State, v.Attempt, v.Retries = r.Int32()-r.Int32(), State(r.IntN(8)), r.IntN(5), r.IntN(3)
		v.Round, v.Error, v.Waiting = Round(r.Uint64()), str(10), str(3)
		for range r.IntN(3) {
			v.Deps = append(v.Deps, TaskID(str(8)))
		}
		for range r.IntN(3) {
			v.Require = append(v.Require, str(8))
		}
		v.CreatedAt, v.StartedAt, v.FinishedAt, v.NotBefore = tm(), tm(), tm(), tm()
		v.Mode, v.Stage, v.Item = Mode(r.IntN(6)), r.IntN(4)-1, r.IntN(1000)
	}
	return vs
}

// sameViews reports whether a and b hold the same values: times as
// instants, an empty slice as nil.
func sameViews(a, b []TaskView) bool {
	norm := func(vs []TaskView) []TaskView {
		out := make([]TaskView, len(vs))
		for i, v := range vs {
			for _, t := range []*time.Time{&v.CreatedAt, &v.StartedAt, &v.FinishedAt, &v.NotBefore} {
				if !t.IsZero() {
					*t = time.Unix(0, t.UnixNano()).UTC()
				}
			}
			if len(v.Payload) == 0 {
				v.Payload = nil
			}
			if len(v.Result) == 0 {
				v.Result = nil
			}
			if len(v.Deps) == 0 {
				v.Deps = nil
			}
			if len(v.Require) == 0 {
				v.Require = nil
			}
			out[i] = v
		}
		return out
	}
	return len(a) == len(b) && reflect.DeepEqual(norm(a), norm(b))
}

func TestTaskViewsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cases := [][]TaskView{{}, {{}}, {fullTaskView()}, randTaskViews(r, 1), randTaskViews(r, 300)}
	for i, vs := range cases {
		p := AppendTaskViews(nil, vs)
		trailer := []byte("rest")
		got, n, err := DecodeTaskViews(append(p, trailer...))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if n != len(p) {
			t.Fatalf("case %d: took %d bytes of %d", i, n, len(p))
		}
		if got == nil || !sameViews(vs, got) {
			t.Fatalf("case %d: decoded views differ:\n%+v\n%+v", i, vs, got)
		}
		// What JSON carried, the binary form carries.
		j, err := json.Marshal(vs)
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON []TaskView
		if err := json.Unmarshal(j, &viaJSON); err != nil {
			t.Fatal(err)
		}
		if !sameViews(viaJSON, got) {
			t.Fatalf("case %d: binary and JSON disagree:\n%+v\n%+v", i, viaJSON, got)
		}
	}
}

// The decoder shares a string that repeats from the view before rather
// than allocating it again.
func TestTaskViewsShareRepeats(t *testing.T) {
	vs := randTaskViews(rand.New(rand.NewPCG(1, 2)), 50)
	p := AppendTaskViews(nil, vs)
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, err := DecodeTaskViews(p); err != nil {
			t.Fatal(err)
		}
	})
	// The slice, and per view at most its id, name and the strings and
	// slices random views set (never its group or handler again).
	if max := float64(1 + 50*9); allocs > max {
		t.Fatalf("%.0f allocations for 50 views, want at most %.0f", allocs, max)
	}
}

func TestDecodeTaskViewsErrors(t *testing.T) {
	p := AppendTaskViews(nil, []TaskView{fullTaskView(), fullTaskView()})
	for cut := 0; cut < len(p); cut++ {
		if _, _, err := DecodeTaskViews(p[:cut]); err == nil || !errors.Is(err, ErrCodec) {
			t.Fatalf("cut at %d: err %v, want an ErrCodec", cut, err)
		}
	}
	// A count no input can hold is refused before anything is allocated.
	if _, _, err := DecodeTaskViews([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("a huge count decoded")
	}
}

// FuzzDecodeTaskViews checks that decoding never panics, that every error
// wraps ErrCodec, and that decoded views re-encode to bytes that decode to
// the same views and re-encode identically.
func FuzzDecodeTaskViews(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	f.Add(AppendTaskViews(nil, nil))
	f.Add(AppendTaskViews(nil, []TaskView{fullTaskView()}))
	f.Add(AppendTaskViews(nil, randTaskViews(r, 3)))
	f.Fuzz(func(t *testing.T, p []byte) {
		vs, n, err := DecodeTaskViews(p)
		if err != nil {
			if !errors.Is(err, ErrCodec) {
				t.Fatalf("error %v does not wrap ErrCodec", err)
			}
			return
		}
		if n > len(p) {
			t.Fatalf("took %d of %d bytes", n, len(p))
		}
		q := AppendTaskViews(nil, vs)
		vs2, _, err := DecodeTaskViews(q)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(vs, vs2) {
			t.Fatalf("re-decoded views differ:\n%+v\n%+v", vs, vs2)
		}
		if q2 := AppendTaskViews(nil, vs2); !bytes.Equal(q, q2) {
			t.Fatalf("re-encoding not stable")
		}
	})
}
