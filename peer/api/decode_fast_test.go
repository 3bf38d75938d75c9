package api

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// sameAsDecodeStrict fails t when fastGroup takes data but decodeStrict
// refuses it or decodes another value, and reports whether fastGroup took
// it.
func sameAsDecodeStrict(t testing.TB, data []byte) bool {
	t.Helper()
	var fast rawGroupOf[rawGroupTask]
	if !fastGroup(data, &fast, nil) {
		return false
	}
	var want rawGroupOf[rawGroupTask]
	if err := decodeStrict(data, &want, ""); err != nil {
		t.Fatalf("fastGroup took %q, which decodeStrict refuses: %v", data, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("fastGroup(%q)\n = %#v\nwant %#v", data, fast, want)
	}
	// Parsed into the room of an earlier group's tasks (getRawTasks), the
	// same value: nothing of the earlier tasks shows through.
	room := []rawGroupTask{{Name: "stale", Handler: "h", Payload: []byte("1"), Deps: []string{"x"}, Pin: "p"}, {Timeout: "1s"}}
	var again rawGroupOf[rawGroupTask]
	if !fastGroup(data, &again, room[:0]) || !reflect.DeepEqual(again, want) {
		t.Fatalf("fastGroup(%q) into a used room\n = %#v\nwant %#v", data, again, want)
	}
	return true
}

// bodyGen writes group bodies from parts clients send and parts only the
// slow path takes: every key of a group and of a task, in any order,
// spaced or not, with values plain, escaped, null, of the wrong type,
// out of range, or with a key twice or misspelled.
type bodyGen struct {
	r *rand.Rand
	// odd is the chance of each value being one fastGroup gives up on.
	odd float64
}

func (g *bodyGen) ws() string {
	return []string{"", "", " ", "\n  ", "\t"}[g.r.IntN(5)]
}

func (g *bodyGen) oneOf(plain, odd []string) string {
	if g.r.Float64() < g.odd {
		return odd[g.r.IntN(len(odd))]
	}
	return plain[g.r.IntN(len(plain))]
}

func (g *bodyGen) str() string {
	return g.oneOf([]string{`""`, `"a"`, `"echo"`, `"10s"`, `"task-3"`, `"sp ace"`},
		[]string{`"q\"uote"`, `"\u00e9"`, `"é"`, `null`, `1`, `["a"]`, `"\ud800"`, `"a\/b"`, `"tab\t"`})
}

func (g *bodyGen) raw() string {
	return g.oneOf([]string{`{"i":1}`, `[1, 2, {"a": "b"}]`, `"s"`, `12.5e3`, `true`, `{ "n" : { "m" : [ ] } }`, `"x\"y"`, `-0`},
		[]string{`null`, `{"a":}`, `[1,]`, `01`, `{"a" 1}`, `"\x"`, `tru`, `[[[[`})
}

func (g *bodyGen) num() string {
	return g.oneOf([]string{`0`, `1`, `-5`, `100`, `2147483647`, `-2147483648`, `123456789`},
		[]string{`2147483648`, `-2147483649`, `1.5`, `1e2`, `01`, `-`, `"1"`, `null`, `9999999999`, `-0`, `1E0`})
}

func (g *bodyGen) list() string {
	var items []string
	for range g.r.IntN(3) {
		items = append(items, g.str())
	}
	return g.oneOf([]string{"[" + strings.Join(items, ","+g.ws()) + "]"}, []string{`null`, `"a"`, `[1]`})
}

func (g *bodyGen) object(fields map[string]func() string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if g.r.IntN(3) > 0 {
			keys = append(keys, k)
		}
	}
	g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	if g.r.Float64() < g.odd && len(keys) > 0 {
		switch g.r.IntN(4) {
		case 0:
			keys = append(keys, keys[0]) // twice
		case 1:
			keys[0] = strings.ToUpper(keys[0][:1]) + keys[0][1:] // encoding/json takes it
		case 2:
			keys = append(keys, "unknown")
		}
	}
	var b strings.Builder
	b.WriteString("{" + g.ws())
	for i, k := range keys {
		if i > 0 {
			b.WriteString("," + g.ws())
		}
		v := `"x"`
		if f := fields[strings.ToLower(k)]; f != nil {
			v = f()
		}
		fmt.Fprintf(&b, "%q%s:%s%s%s", k, g.ws(), g.ws(), v, g.ws())
	}
	b.WriteString("}")
	return b.String()
}

func (g *bodyGen) task() string {
	return g.object(map[string]func() string{"name": g.str, "handler": g.str, "payload": g.raw, "priority": g.num,
		"timeout": g.str, "retry": g.raw, "delay": g.str, "deps": g.list, "require": g.list, "pin": g.str})
}

func (g *bodyGen) group() string {
	tasks := func() string {
		var ts []string
		for range g.r.IntN(4) {
			ts = append(ts, g.task())
		}
		return g.oneOf([]string{"[" + strings.Join(ts, ","+g.ws()) + "]"}, []string{`null`, `{}`, `[1]`})
	}
	fields := map[string]func() string{"mode": g.str, "key": g.str, "trace": g.str, "notify": g.str, "to": g.str, "tasks": tasks, "concurrency": g.num}
	if g.r.Float64() < g.odd { // a pipeline's: the slow path's
		fields["stages"], fields["items"] = func() string { return `[]` }, func() string { return `[]` }
	}
	body := g.object(fields)
	return g.ws() + body + g.oneOf([]string{"", "\n", " "}, []string{"x", "{}", " 1"})
}

// fastGroup decodes what decodeStrict decodes, for every body it takes,
// and takes what clients send.
func TestFastGroupMatchesDecodeStrict(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	took := map[float64]int{}
	for i := range 30000 {
		g := &bodyGen{r: r, odd: []float64{0, 0.03, 0.3}[i%3]}
		if sameAsDecodeStrict(t, []byte(g.group())) {
			took[g.odd]++
		}
	}
	if took[0] < 5000 || took[0.03] < 1000 {
		t.Fatalf("fastGroup took %v bodies of 10,000 (plain, a few odd values): it gives up on what clients send", took)
	}
	if took[0.3] > 5000 {
		t.Fatalf("fastGroup took %d of 10,000 bodies with many odd values", took[0.3])
	}
	w1 := `{"mode":"parallel","tasks":[{"handler":"echo","payload":{"i":1}},{"handler":"echo","payload":{"i":2}}]}`
	if !sameAsDecodeStrict(t, []byte(w1)) {
		t.Fatal("fastGroup gives up on a W1 group")
	}
}

func FuzzFastGroupMatchesDecodeStrict(f *testing.F) {
	f.Add([]byte(`{"mode":"parallel","tasks":[{"handler":"echo","payload":{"i":1},"priority":-3,"deps":["a"]}]}`))
	f.Add([]byte(`{"tasks":[{"handler":"e","retry":{"max_attempts":3}},{"name":"b","pin":"n1","require":[]}],"key":"k"} `))
	f.Add([]byte(`{"Tasks":[{"handler":"\u0065"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsDecodeStrict(t, data)
	})
}
