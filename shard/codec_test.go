package shard

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

var codecT0 = time.Unix(0, 1_767_225_600_123_456_789).UTC()

// codecFullSpec returns a group spec with every field set.
func codecFullSpec() *GroupSpec {
	return &GroupSpec{
		ID: "g-7f3a", Mode: ModeDAG, Key: "idem-1", Trace: "trace-9",
		Tasks: []TaskSpec{
			{Name: "a", Handler: "resize", Payload: []byte(`{"w":1}`), Priority: -3,
				Timeout: 30 * time.Second, Retry: Retry{MaxAttempts: 5, Backoff: time.Second, MaxBackoff: time.Minute},
				Delay: -time.Millisecond, Deps: nil, Stage: 0},
			{Name: "b", Handler: "resize", Payload: []byte{0, 255}, Priority: math.MaxInt32,
				Timeout: 1, Retry: Retry{MaxAttempts: math.MaxInt, Backoff: math.MinInt64, MaxBackoff: math.MaxInt64},
				Delay: time.Hour, Deps: []string{"a", "", "ü"}, Stage: math.MinInt,
				Item: math.MaxInt32, Require: []string{"gpu=true", "zone=a"}, Pin: "12D3KooWPin"},
		},
		Notify: "https://hooks.example/needle",
		Stages: []StageSpec{{Name: "parse", Concurrency: 4}, {Name: "load"}},
	}
}

// codecFullEvent returns an event of type ty with every field set; Spec is
// set only for EvSubmitted.
func codecFullEvent(ty EventType) Event {
	e := Event{
		Type: ty, At: codecT0, Group: "g-7f3a", Task: TaskIDOf("g-7f3a", 12), Round: math.MaxUint64,
		Holder: "12D3KooWHolder#boot1", Expiry: codecT0.Add(30 * time.Second), NotBefore: codecT0.Add(-time.Hour),
		Result: []byte("result"), Error: "boom", Permanent: true, TimedOut: true, By: "admin",
	}
	if ty == EvSubmitted {
		e.Spec = codecFullSpec()
	}
	if ty == EvScheduleSet || ty == EvScheduleUpdated {
		e.Sched = &ScheduleSpec{ID: "s01", Name: "nightly", Cron: "0 2 * * *", Every: time.Minute, TZ: "Europe/Paris",
			Overlap: OverlapAllow, Misfire: MisfireSkip, Paused: true, Group: *codecFullSpec()}
	}
	return e
}

// codecNormEvent returns e as decoding returns it: empty lists and byte
// strings nil, times as UTC instants.
func codecNormEvent(e Event) Event {
	e.At, e.Expiry, e.NotBefore = codecNormTime(e.At), codecNormTime(e.Expiry), codecNormTime(e.NotBefore)
	if len(e.Result) == 0 {
		e.Result = nil
	}
	if e.Spec != nil {
		g := codecNormSpec(*e.Spec)
		e.Spec = &g
	}
	if e.Sched != nil {
		sc := *e.Sched
		sc.Group = codecNormSpec(sc.Group)
		e.Sched = &sc
	}
	return e
}

func codecNormSpec(g GroupSpec) GroupSpec {
	if len(g.Tasks) == 0 {
		g.Tasks = nil
	}
	g.Tasks = append([]TaskSpec(nil), g.Tasks...)
	for i := range g.Tasks {
		t := &g.Tasks[i]
		if len(t.Payload) == 0 {
			t.Payload = nil
		}
		if len(t.Deps) == 0 {
			t.Deps = nil
		}
	}
	return g
}

func codecNormTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(0, t.UnixNano()).UTC()
}

func codecNormBatch(b Batch) Batch {
	if len(b.Events) == 0 {
		b.Events = nil
	}
	b.Events = append([]Event(nil), b.Events...)
	for i := range b.Events {
		b.Events[i] = codecNormEvent(b.Events[i])
	}
	return b
}

func TestCodecEventRoundTrip(t *testing.T) {
	type test struct {
		name string
		ev   Event
	}
	var tests []test
	for ty := EvSubmitted; ty.Valid(); ty++ {
		tests = append(tests, test{ty.String(), codecFullEvent(ty)})
	}
	tests = append(tests,
		test{"zero fields", Event{Type: EvRemoved}},
		test{"retried with a key", Event{Type: EvRetried, Group: "g", Task: "g.1", By: "op", Key: "k-1"}},
		test{"group retried", Event{Type: EvRetried, Group: "g", By: "op"}},
		test{"schedule updated", Event{Type: EvScheduleUpdated, Group: "s1", Round: 77, Expiry: codecT0, By: "token:ops",
			Sched: &ScheduleSpec{ID: "s1", Cron: "0 3 * * *", TZ: "Europe/Paris", Overlap: OverlapSkip, Misfire: MisfireOnce,
				Group: GroupSpec{Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}}}}},
		test{"expired, worker died alone", Event{Type: EvExpired, Group: "g", Task: "g.1", Round: 3, Holder: "n1#b", Died: DiedAlone}},
		test{"expired, worker died with others", Event{Type: EvExpired, Group: "g", Task: "g.1", Round: 3, Died: DiedWithOthers}},
		test{"submitted nil spec", Event{Type: EvSubmitted, Group: "g"}},
		test{"submitted empty spec", Event{Type: EvSubmitted, Spec: &GroupSpec{Mode: ModeSingle}}},
		test{"task not in group", Event{Type: EvReadied, Group: "g", Task: "h.1"}},
		test{"task index not canonical", Event{Type: EvReadied, Group: "g", Task: "g.01"}},
		test{"task index signed", Event{Type: EvReadied, Group: "g", Task: "g.+1"}},
		test{"task index max", Event{Type: EvReadied, Group: "g", Task: "g.18446744073709551615"}},
		test{"task index overflow", Event{Type: EvReadied, Group: "g", Task: "g.18446744073709551616"}},
		test{"task of empty group", Event{Type: EvReadied, Task: ".0"}},
		test{"task group only", Event{Type: EvReadied, Group: "g", Task: "g."}},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := AppendEvent([]byte("prefix"), &tt.ev)
			got, n, err := DecodeEvent(p[len("prefix"):])
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if n != len(p)-len("prefix") {
				t.Errorf("DecodeEvent consumed %d bytes; want %d", n, len(p)-len("prefix"))
			}
			if want := codecNormEvent(tt.ev); !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeEvent = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestCodecBatchRoundTrip(t *testing.T) {
	b := Batch{Origin: "12D3KooWOrigin", Req: 42}
	for ty := EvSubmitted; ty.Valid(); ty++ {
		b.Events = append(b.Events, codecFullEvent(ty))
	}
	for _, b := range []Batch{b, {}, {Origin: "o", Events: []Event{}}} {
		p := AppendBatch(nil, &b)
		got, err := DecodeBatch(p)
		if err != nil {
			t.Fatalf("DecodeBatch: %v", err)
		}
		if want := codecNormBatch(b); !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeBatch = %+v\nwant %+v", got, want)
		}
	}
}

func TestCodecGroupSpecRoundTrip(t *testing.T) {
	for m := ModeSingle; m <= ModePipeline; m++ {
		g := codecFullSpec()
		g.Mode = m
		p := AppendGroupSpec(nil, g)
		got, n, err := DecodeGroupSpec(append(p, 0xff))
		if err != nil || n != len(p) {
			t.Fatalf("DecodeGroupSpec = _, %d, %v; want %d, nil", n, err, len(p))
		}
		if want := codecNormSpec(*g); !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeGroupSpec = %+v\nwant %+v", got, want)
		}
	}
}

// TestCodecGolden pins the format: if it fails, the layout changed, and
// entries already in Raft logs would no longer decode. Bump CodecVersion
// and keep a decoder for the old version instead of editing the want value.
func TestCodecGolden(t *testing.T) {
	at := time.Unix(1_700_000_000, 5).UTC()
	b := Batch{Origin: "p1", Req: 7, Events: []Event{
		{Type: EvSubmitted, At: at, Group: "g", Spec: &GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{
			{Name: "a", Handler: "h", Payload: []byte{1}, Priority: -1, Timeout: time.Second,
				Retry: Retry{MaxAttempts: 3, Backoff: 2, MaxBackoff: 4}, Delay: 5, Deps: []string{"b"}, Stage: 1},
		}}},
		{Type: EvFailed, At: at, Group: "g", Task: "g.3", Round: 2, Holder: "p2", NotBefore: time.Unix(0, 0),
			Error: "x", Permanent: true, TimedOut: true},
		{Type: EvCanceled, Group: "g", Task: "other", By: "me", Result: []byte("r")},
	}}
	const v1 = "0102703107" + "03" +
		"0104" + "8a80d0e2c6bfce972f" + "0167" + "00" + "00" + "00" + "00" + "00" + "00" + "00" + "00" +
		"0167" + "02" + "00" + "00" + "01" +
		"0161" + "0168" + "0101" + "01" + "80a8d6b907" + "06" + "04" + "08" + "0a" + "01" + "0162" + "02" +
		"05" + "3b" + "03" + "02" + "027032" + "00" + "ffffffffffffffffff01" + "00" + "0178" + "00" +
		"08" + "20" + "00" + "056f74686572" + "00" + "00" + "00" + "00" + "0172" + "00" + "026d65"
	// Version 2 adds the task's item, require and pin (00 00 00) and the
	// group's notify and stages (00 00).
	const want = "0202703107" + "03" +
		"0104" + "8a80d0e2c6bfce972f" + "0167" + "00" + "00" + "00" + "00" + "00" + "00" + "00" + "00" +
		"0167" + "02" + "00" + "00" + "01" +
		"0161" + "0168" + "0101" + "01" + "80a8d6b907" + "06" + "04" + "08" + "0a" + "01" + "0162" + "02" +
		"00" + "00" + "00" + "00" + "00" +
		"05" + "3b" + "03" + "02" + "027032" + "00" + "ffffffffffffffffff01" + "00" + "0178" + "00" +
		"08" + "20" + "00" + "056f74686572" + "00" + "00" + "00" + "00" + "0172" + "00" + "026d65"
	if got := hex.EncodeToString(AppendBatch(nil, &b)); got != want {
		t.Errorf("AppendBatch =\n%s\nwant\n%s", got, want)
	}
	// Entries written by version 1 still decode to the same batch.
	old, _ := hex.DecodeString(v1)
	got, err := DecodeBatch(old)
	if err != nil {
		t.Fatalf("DecodeBatch(v1): %v", err)
	}
	if again := hex.EncodeToString(AppendBatch(nil, &got)); again != want {
		t.Errorf("v1 decoded and re-encoded =\n%s\nwant\n%s", again, want)
	}
}

func TestCodecTimes(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	tests := []struct {
		name    string
		in, out time.Time
	}{
		{"zero", time.Time{}, time.Time{}},
		{"epoch", time.Unix(0, 0), time.Unix(0, 0).UTC()},
		{"epoch utc", time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC()},
		{"one ns", time.Unix(0, 1).UTC(), time.Unix(0, 1).UTC()},
		{"before epoch", time.Unix(0, -1).UTC(), time.Unix(0, -1).UTC()},
		{"zone dropped", time.Unix(5, 6).In(berlin), time.Unix(5, 6).UTC()},
		{"monotonic dropped", time.Now(), time.Unix(0, time.Now().UnixNano()).UTC()},
		{"max", time.Unix(0, math.MaxInt64).UTC(), time.Unix(0, math.MaxInt64).UTC()},
		{"min", time.Unix(0, math.MinInt64+1).UTC(), time.Unix(0, math.MinInt64+1).UTC()},
		{"clamped high", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MaxInt64).UTC()},
		{"clamped low", time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MinInt64+1).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if tt.name == "monotonic dropped" {
				tt.out = time.Unix(0, in.UnixNano()).UTC()
			}
			d := NewDecoder(AppendTime(nil, in))
			if got := d.Time(); got != tt.out || d.Err() != nil || d.Len() != 0 {
				t.Errorf("Time(AppendTime(%v)) = %v, err %v, %d left; want %v", in, got, d.Err(), d.Len(), tt.out)
			}
		})
	}
}

func TestDecoderPrimitives(t *testing.T) {
	var p []byte
	p = binary.AppendUvarint(p, 300)
	p = binary.AppendVarint(p, -5)
	p = AppendString(p, "héllo")
	p = AppendBytes(p, []byte{1, 2})
	p = AppendBytes(p, []byte{})
	p = append(p, 9)
	p = binary.AppendVarint(p, math.MinInt32)
	p = AppendString(p, "same")
	d := NewDecoder(p)
	if got := d.Uvarint(); got != 300 {
		t.Errorf("Uvarint() = %d; want 300", got)
	}
	if got := d.Varint(); got != -5 {
		t.Errorf("Varint() = %d; want -5", got)
	}
	if got := d.String(); got != "héllo" {
		t.Errorf("String() = %q; want héllo", got)
	}
	b := d.Bytes()
	p[len(p)-d.Len()-2] = 7 // the input may be reused: Bytes copied
	if !reflect.DeepEqual(b, []byte{1, 2}) {
		t.Errorf("Bytes() = %v; want [1 2]", b)
	}
	if got := d.Bytes(); got != nil {
		t.Errorf("Bytes() = %#v; want nil", got)
	}
	if got := d.Byte(); got != 9 {
		t.Errorf("Byte() = %d; want 9", got)
	}
	if got := d.int32(); got != math.MinInt32 {
		t.Errorf("int32() = %d; want %d", got, math.MinInt32)
	}
	prev := strings.Clone("same")
	if got := d.StringReuse(prev); got != prev || d.Err() != nil || d.Len() != 0 {
		t.Errorf("StringReuse() = %q, err %v, %d left; want %q, nil, 0", got, d.Err(), d.Len(), prev)
	}
	// Sticky error.
	if d.Byte(); !errors.Is(d.Err(), ErrCodec) {
		t.Fatalf("Byte() at end: err %v; want ErrCodec", d.Err())
	}
	d = NewDecoder([]byte{5, 'x'})
	if got := d.String(); got != "" || !errors.Is(d.Err(), ErrCodec) {
		t.Errorf("String() of overlong = %q, %v; want ErrCodec", got, d.Err())
	}
	if got := d.Uvarint(); got != 0 || d.Len() != 1 {
		t.Errorf("after failure Uvarint() = %d with %d left; want 0 and input untouched", got, d.Len())
	}
}

func TestDecoderHostileLengths(t *testing.T) {
	huge := binary.AppendUvarint(nil, 1<<62)
	for _, read := range []func(*Decoder){
		func(d *Decoder) { _ = d.String() },
		func(d *Decoder) { d.Bytes() },
		func(d *Decoder) { d.Count(1) },
		func(d *Decoder) { d.StringReuse("") },
	} {
		d := NewDecoder(append(huge, "abc"...))
		read(&d)
		if !errors.Is(d.Err(), ErrCodec) {
			t.Errorf("hostile length: err %v; want ErrCodec", d.Err())
		}
	}
	for _, p := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // 11-byte varint
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},       // > 64 bits
		{0x80}, // truncated
	} {
		d := NewDecoder(p)
		d.Uvarint()
		e := NewDecoder(p)
		e.Varint()
		if !errors.Is(d.Err(), ErrCodec) || !errors.Is(e.Err(), ErrCodec) {
			t.Errorf("varint %x: errs %v, %v; want ErrCodec", p, d.Err(), e.Err())
		}
	}
}

// codecEventBytes encodes e on its own, for building malformed inputs.
func codecEventBytes(e Event) []byte { return AppendEvent(nil, &e) }

func TestCodecDecodeErrors(t *testing.T) {
	ok := codecEventBytes(Event{Type: EvReadied, Group: "g", Task: "g.1"})
	died := codecEventBytes(Event{Type: EvExpired, Group: "g", Task: "g.1", Died: DiedAlone})
	batch := func(evs ...[]byte) []byte {
		p := []byte{CodecVersion, 0, 0, byte(len(evs))}
		for _, e := range evs {
			p = append(p, e...)
		}
		return p
	}
	withByte := func(p []byte, i int, c byte) []byte {
		q := append([]byte(nil), p...)
		q[i] = c
		return q
	}
	spec := codecEventBytes(Event{Type: EvSubmitted, Spec: &GroupSpec{ID: "g", Mode: ModeDAG,
		Tasks: []TaskSpec{{Name: "a"}, {Name: "b", Deps: []string{"a", "c"}}}}})
	tests := []struct {
		name string
		p    []byte
		want string
	}{
		{"empty", nil, "batch.version: unexpected end"},
		{"version", []byte{3, 0, 0, 0}, "batch.version: unknown version 3"},
		{"trailing", append(batch(ok), 0), "batch: 1 trailing bytes"},
		{"hostile count", []byte{CodecVersion, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, "batch.events: count"},
		{"hostile origin", []byte{CodecVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}, "batch.origin: length"},
		{"type 0", batch(ok, withByte(ok, 0, 0)), "batch.events[1].type: unknown event type 0"},
		{"unknown type", batch(withByte(ok, 0, byte(numEventTypes))), fmt.Sprintf("batch.events[0].type: unknown event type %d", numEventTypes)},
		{"died on readied", batch(withByte(ok, 1, flagDied|flagTaskIndex)), "batch.events[0].flags: died on a readied"},
		{"died 0", batch(withByte(died, len(died)-1, 0)),
			"batch.events[0]: died 0: want 1 or 2"},
		{"spec on readied", batch(withByte(ok, 1, flagSpec|flagTaskIndex)), "batch.events[0].flags: spec present on a readied"},
		{"truncated task", batch(ok[:4]), "batch.events: count"},
		{"mode", batch(withByte(spec, 14, 0)), "batch.events[0].spec.mode: unknown mode 0"},
		{"dep", batch(spec[:len(spec)-7]), "batch.events[0].spec.tasks[1].deps[1]: length 1 exceeds 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeBatch(tt.p)
			if !errors.Is(err, ErrCodec) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeBatch(%x) = %v; want ErrCodec containing %q", tt.p, err, tt.want)
			}
		})
	}
}

func TestCodecEncodePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"type 0", func() { AppendEvent(nil, &Event{}) }},
		{"type 10", func() { AppendEvent(nil, &Event{Type: numEventTypes}) }},
		{"spec on leased", func() { AppendEvent(nil, &Event{Type: EvLeased, Spec: &GroupSpec{Mode: ModeSingle}}) }},
		{"key on canceled", func() { AppendEvent(nil, &Event{Type: EvCanceled, Key: "k"}) }},
		{"died on failed", func() { AppendEvent(nil, &Event{Type: EvFailed, Died: DiedAlone}) }},
		{"died 3", func() { AppendEvent(nil, &Event{Type: EvExpired, Died: 3}) }},
		{"mode 0", func() { AppendEvent(nil, &Event{Type: EvSubmitted, Spec: &GroupSpec{}}) }},
		{"mode 7", func() { AppendGroupSpec(nil, &GroupSpec{Mode: 7}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tt.f()
		})
	}
}

// TestCodecTruncation checks that every proper prefix of a valid encoding
// is an error, not a panic or a shorter value.
func TestCodecTruncation(t *testing.T) {
	b := Batch{Origin: "o", Req: 1}
	for ty := EvSubmitted; ty.Valid(); ty++ {
		b.Events = append(b.Events, codecFullEvent(ty))
	}
	p := AppendBatch(nil, &b)
	for i := range p {
		if _, err := DecodeBatch(p[:i]); !errors.Is(err, ErrCodec) {
			t.Fatalf("DecodeBatch(p[:%d]) err = %v; want ErrCodec", i, err)
		}
	}
	for _, e := range b.Events {
		q := codecEventBytes(e)
		for i := range q {
			if _, _, err := DecodeEvent(q[:i]); !errors.Is(err, ErrCodec) {
				t.Fatalf("DecodeEvent(%v[:%d]) err = %v; want ErrCodec", e.Type, i, err)
			}
		}
	}
	q := AppendGroupSpec(nil, codecFullSpec())
	for i := range q {
		if _, _, err := DecodeGroupSpec(q[:i]); !errors.Is(err, ErrCodec) {
			t.Fatalf("DecodeGroupSpec(q[:%d]) err = %v; want ErrCodec", i, err)
		}
	}
}

// TestCodecRandomRoundTrip is the property test: random batches and events
// decode to what was encoded, after normalising.
func TestCodecRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	for i := range 10_000 {
		b := codecRandBatch(r)
		buf = AppendBatch(buf[:0], &b)
		got, err := DecodeBatch(buf)
		if err != nil {
			t.Fatalf("case %d: DecodeBatch: %v", i, err)
		}
		if want := codecNormBatch(b); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: DecodeBatch = %+v\nwant %+v", i, got, want)
		}
		e := codecRandEvent(r)
		buf = AppendEvent(buf[:0], &e)
		ge, n, err := DecodeEvent(buf)
		if err != nil || n != len(buf) {
			t.Fatalf("case %d: DecodeEvent = _, %d, %v; want %d, nil", i, n, err, len(buf))
		}
		if want := codecNormEvent(e); !reflect.DeepEqual(ge, want) {
			t.Fatalf("case %d: DecodeEvent = %+v\nwant %+v", i, ge, want)
		}
	}
}

func codecRandBatch(r *rand.Rand) Batch {
	b := Batch{Origin: codecRandString(r), Req: codecRandUint(r)}
	if n := r.IntN(6); n > 0 || r.IntN(2) == 0 {
		b.Events = make([]Event, n)
	}
	for i := range b.Events {
		b.Events[i] = codecRandEvent(r)
	}
	return b
}

func codecRandEvent(r *rand.Rand) Event {
	e := Event{
		Type: EventType(1 + r.IntN(int(numEventTypes-1))), At: codecRandTime(r),
		Group: GroupID(codecRandString(r)), Round: Round(codecRandUint(r)), Holder: codecRandString(r),
		Expiry: codecRandTime(r), NotBefore: codecRandTime(r), Result: codecRandBytes(r),
		Error: codecRandString(r), Permanent: r.IntN(2) == 0, TimedOut: r.IntN(2) == 0, By: codecRandString(r),
	}
	if r.IntN(2) == 0 {
		e.Task = TaskID(string(e.Group) + "." + strconv.FormatUint(codecRandUint(r), 10))
	} else {
		e.Task = TaskID(codecRandString(r))
	}
	if e.Type == EvSubmitted && r.IntN(4) > 0 {
		e.Spec = codecRandSpec(r)
	}
	if e.Type == EvExpired {
		e.Died = Death(r.IntN(3))
	}
	if e.Type == EvScheduleSet || e.Type == EvScheduleUpdated {
		e.Sched = &ScheduleSpec{ID: ScheduleID(codecRandString(r)), Name: codecRandString(r), Cron: codecRandString(r),
			Every: time.Duration(codecRandInt(r)), TZ: codecRandString(r), Overlap: Overlap(1 + r.IntN(2)),
			Misfire: Misfire(1 + r.IntN(2)), Paused: r.IntN(2) == 0, Group: *codecRandSpec(r)}
	}
	return e
}

func codecRandSpec(r *rand.Rand) *GroupSpec {
	g := &GroupSpec{ID: GroupID(codecRandString(r)), Mode: Mode(1 + r.IntN(int(ModeBroadcast))),
		Key: codecRandString(r), Trace: codecRandString(r), Notify: codecRandString(r)}
	for range r.IntN(3) {
		g.Stages = append(g.Stages, StageSpec{Name: codecRandString(r), Concurrency: r.IntN(1 << 20)})
	}
	if n := r.IntN(5); n > 0 || r.IntN(2) == 0 {
		g.Tasks = make([]TaskSpec, n)
	}
	for i := range g.Tasks {
		g.Tasks[i] = TaskSpec{
			Name: codecRandString(r), Handler: codecRandString(r), Payload: codecRandBytes(r),
			Priority: int32(r.Uint32()), Timeout: time.Duration(codecRandInt(r)),
			Retry: Retry{MaxAttempts: int(codecRandInt(r)), Backoff: time.Duration(codecRandInt(r)),
				MaxBackoff: time.Duration(codecRandInt(r))},
			Delay: time.Duration(codecRandInt(r)), Stage: int(codecRandInt(r)),
			Item: r.IntN(1 << 30), Pin: codecRandString(r),
		}
		for range r.IntN(3) {
			g.Tasks[i].Require = append(g.Tasks[i].Require, codecRandString(r))
		}
		if n := r.IntN(4); n > 0 || r.IntN(2) == 0 {
			g.Tasks[i].Deps = make([]string, n)
		}
		for j := range g.Tasks[i].Deps {
			g.Tasks[i].Deps[j] = codecRandString(r)
		}
	}
	return g
}

// codecRandUint returns values of every varint length.
func codecRandUint(r *rand.Rand) uint64 { return r.Uint64() >> r.IntN(65) }

func codecRandInt(r *rand.Rand) int64 {
	v := int64(codecRandUint(r))
	if r.IntN(2) == 0 {
		return -v
	}
	return v
}

func codecRandString(r *rand.Rand) string { return string(codecRandBytes(r)) }

func codecRandBytes(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(200))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// codecRandTime returns zero, the epoch, range ends, arbitrary zones and
// ordinary instants.
func codecRandTime(r *rand.Rand) time.Time {
	switch r.IntN(8) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, 0)
	case 2:
		return time.Unix(0, math.MaxInt64-int64(r.IntN(2)))
	case 3:
		return time.Unix(0, math.MinInt64+1+int64(r.IntN(2))).In(time.FixedZone("x", r.IntN(10000)))
	}
	return time.Unix(0, int64(r.Uint64())).UTC()
}

// TestCodecAllocBound checks that hostile inputs cannot make the decoder
// allocate much more than their own size.
func TestCodecAllocBound(t *testing.T) {
	valid := Batch{Origin: "o"}
	for range 100 {
		valid.Events = append(valid.Events, Event{Type: EvRemoved})
	}
	inputs := [][]byte{
		{CodecVersion, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f},
		append([]byte{CodecVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f}, make([]byte, 100)...),
		AppendBatch(nil, &valid),
		append(codecEventBytes(Event{Type: EvSubmitted, Spec: &GroupSpec{Mode: 1}})[:17], 0xff, 0xff, 0xff, 0x7f),
	}
	for i, p := range inputs {
		perByte := math.Inf(1)
		for range 5 { // the least of a few runs, in case other goroutines allocate
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 10 {
				_, _ = DecodeBatch(p)
			}
			runtime.ReadMemStats(&after)
			perByte = min(perByte, float64(after.TotalAlloc-before.TotalAlloc)/10/float64(len(p)))
		}
		if perByte > 32 {
			t.Errorf("input %d (%d bytes): %.1f bytes allocated per input byte; want <= 32", i, len(p), perByte)
		}
	}
}

func codecBenchBatches() map[string]*Batch {
	g := GroupID("g-01HZX3V9Q7K2M4N8P6R5T0W1YZ")
	at := time.Unix(1_767_225_600, 123_456_789).UTC()
	holder := "12D3KooWGzBxYfSHbPLxkSgTMuF6VnvbgZ8CrpvT3EaXW9SzX2Ba#7f3a9c1e"
	spec := &GroupSpec{ID: g, Mode: ModeParallel, Key: "batch-2026-01-01", Trace: "4bf92f3577b34da6a3ce929d0e0e4736"}
	succeeded := &Batch{Origin: holder, Req: 12345}
	for i := range 1000 {
		payload := fmt.Appendf(nil, "%016d", i)
		spec.Tasks = append(spec.Tasks, TaskSpec{Name: fmt.Sprintf("t%d", i), Handler: "resize", Payload: payload,
			Priority: 1, Timeout: time.Minute, Retry: Retry{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Minute}})
		succeeded.Events = append(succeeded.Events, Event{Type: EvSucceeded, At: at, Group: g,
			Task: TaskIDOf(g, i), Round: 1, Holder: holder, Result: payload})
	}
	return map[string]*Batch{
		"submitted-1000": {Origin: holder, Req: 1, Events: []Event{{Type: EvSubmitted, At: at, Group: g, Spec: spec}}},
		"succeeded-1000": succeeded,
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, name := range []string{"submitted-1000", "succeeded-1000"} {
		batch := codecBenchBatches()[name]
		b.Run(name, func(b *testing.B) {
			buf := AppendBatch(nil, batch)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendBatch(buf[:0], batch)
			}
		})
		b.Run(name+"-fresh", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				AppendBatch(nil, batch)
			}
		})
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	for _, name := range []string{"submitted-1000", "succeeded-1000"} {
		p := AppendBatch(nil, codecBenchBatches()[name])
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeBatch(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeBatchReusing: submitted groups' task lists are decoded into the
// room given, one after the other, when it has space, into a larger one
// returned when it has not, and never a schedule's group (the shard keeps
// it); the batch is the one DecodeBatch gives.
func TestDecodeBatchReusing(t *testing.T) {
	group := func(id string, n int) *GroupSpec {
		g := &GroupSpec{ID: GroupID(id), Mode: ModeParallel}
		for i := range n {
			g.Tasks = append(g.Tasks, TaskSpec{Name: fmt.Sprintf("t%d", i), Handler: "echo", Payload: []byte{byte(i)}})
		}
		return g
	}
	sched := codecFullEvent(EvScheduleSet)
	b := Batch{Origin: "o", Events: []Event{
		{Type: EvSubmitted, Group: "g1", Spec: group("g1", 3)},
		sched,
		{Type: EvSubmitted, Group: "g2", Spec: group("g2", 2)},
	}}
	p := AppendBatch(nil, &b)
	want, err := DecodeBatch(p)
	if err != nil {
		t.Fatal(err)
	}
	in := func(ts []TaskSpec, room []TaskSpec) bool {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(room[:1])))
		at := uintptr(unsafe.Pointer(unsafe.SliceData(ts)))
		return at >= lo && at < lo+uintptr(cap(room))*unsafe.Sizeof(TaskSpec{})
	}

	room := make([]TaskSpec, 2, 8)
	got, used, err := DecodeBatchReusing(p, nil, room)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeBatchReusing = %v:\n%+v\nwant\n%+v", err, got, want)
	}
	if len(used) != 5 || unsafe.SliceData(used) != unsafe.SliceData(room) {
		t.Errorf("room used: len %d, the same array %v; want 5 in the room given", len(used), unsafe.SliceData(used) == unsafe.SliceData(room))
	}
	if !in(got.Events[0].Spec.Tasks, room) || !in(got.Events[2].Spec.Tasks, room) {
		t.Error("a submitted group's tasks are not in the room")
	}
	if len(got.Events[1].Sched.Group.Tasks) > 0 && in(got.Events[1].Sched.Group.Tasks, room) {
		t.Error("a schedule's group took the room: the shard keeps it")
	}
	if cap(got.Events[0].Spec.Tasks) != 3 {
		t.Errorf("a group's tasks have capacity %d; want 3 (an append must not run into the next group's)", cap(got.Events[0].Spec.Tasks))
	}

	small := make([]TaskSpec, 0, 4)
	got, used, err = DecodeBatchReusing(p, nil, small)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeBatchReusing into too little room = %v:\n%+v", err, got)
	}
	if cap(used) < 5 || !in(got.Events[2].Spec.Tasks, used) {
		t.Errorf("room returned: cap %d, holding the last group %v; want the larger room the batch took", cap(used), in(got.Events[2].Spec.Tasks, used))
	}
}
