package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// answer is a group's answer as a peer writes it (api's encoder writes
// what json.Marshal does): n tasks in the states, results and errors a
// run can leave.
func answer(tb testing.TB, n int) []byte {
	tb.Helper()
	created := time.Date(2026, 12, 5, 1, 33, 56, 708518766, time.UTC)
	finished := created.Add(8488647 * time.Nanosecond)
	whole := created.Add(time.Second)
	g := api.Group{ID: "gdcf7a47ae133bb110b84e87e", Mode: "parallel", State: "FAILED", Trace: "c90cb731ca7dfe10",
		Total: n, Counts: map[string]int{}, CreatedAt: &created}
	for i := range n {
		t := api.Task{ID: fmt.Sprintf("%s.%d", g.ID, i), Group: g.ID, Name: fmt.Sprintf("t%d", i), Handler: "echo",
			State: "SUCCEEDED", Attempt: 1, Round: uint64(1 + i%3), Peer: "12D3KooWQ3JinzajFxjBxAYQa8jeULjMEqCFfearh2WwenfZMcBk",
			Result: json.RawMessage(fmt.Sprintf(`{"w":"w1","rep":1,"i":%d}`, i)), CreatedAt: &created, StartedAt: &created, FinishedAt: &finished}
		switch i % 7 {
		case 1:
			why := "handler \"exec\" failed:\n\texit status 2 \u00e9\u2028"
			t.State, t.Result, t.Error, t.Attempt = "FAILED", nil, &why, 3
		case 2:
			t.State, t.Result, t.StartedAt, t.FinishedAt, t.Peer, t.Round = "READY", nil, nil, nil, "", 0
			t.Deps = []string{"t0", "t1"}
		case 3:
			t.Result = json.RawMessage(`"a \"quoted\" \\ result \u0041 \u00e9"`)
			t.FinishedAt = &whole
		case 4:
			t.Result = json.RawMessage(`[1, -2.5e3, 0.25, true, false, null, {"a": {"b": []}}]`)
			stage := 2
			t.Stage, t.Handler = &stage, "sleep"
		case 5:
			t.Result = json.RawMessage(`12345678901234567890`)
			t.Require = []string{"gpu"}
		}
		g.Counts[t.State]++
		g.Tasks = append(g.Tasks, t)
	}
	b, err := json.Marshal(g)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sameAsJSON checks decodeGroup's contract on b: when it reads b, it
// reads what encoding/json does, and keeps nothing of b.
func sameAsJSON(tb testing.TB, b []byte) (fast bool) {
	tb.Helper()
	var got, want Group
	own := append([]byte(nil), b...)
	if !decodeGroup(own, &got) {
		return false
	}
	for i := range own { // what it read must not point into its input
		own[i] = 'X'
	}
	if err := json.Unmarshal(b, &want); err != nil {
		tb.Fatalf("decodeGroup read what encoding/json refuses (%v): %.200q", err, b)
	}
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("decodeGroup read %.300q as\n%+v\nencoding/json as\n%+v", b, got, want)
	}
	return true
}

func TestDecodeGroupMatchesJSON(t *testing.T) {
	canonical := answer(t, 40)
	if !sameAsJSON(t, canonical) {
		t.Fatal("decodeGroup did not read a peer's answer")
	}
	if !sameAsJSON(t, answer(t, 0)) {
		t.Fatal("decodeGroup did not read an empty group")
	}
	s := string(canonical)
	for _, tc := range []struct {
		name string
		doc  string
		fast bool // decodeGroup must read it (else it may leave it to encoding/json)
	}{
		{"spaces", " {\n\t\"id\" : \"g1\" , \"counts\" : { \"READY\" : 2 } ,\"tasks\":[ ] }\r\n", true},
		{"nulls", `{"id":null,"mode":null,"counts":null,"tasks":[{"id":null,"attempt":null,"result":null,"error":null,"started_at":null,"finished_at":""}]}`, true},
		{"unknown keys", `{"x":{"y":[1,{"z":"\"\\\/\b\f\n\r\t\u00e9"}]},"id":"g","tasks":[{"id":"a","deps":["b"],"n":-0.5e-3}]}`, true},
		{"error object", `{"tasks":[{"id":"a","error":{"code":"x","n":[1,2]}}]}`, true},
		{"key in another case", strings.Replace(s, `"state"`, `"State"`, 1), false},
		{"key with a kelvin sign", "{\"tas\u212As\":[]}", false},
		{"escaped key", `{"tas\u006bs":[]}`, false},
		{"task key in another case", strings.Replace(s, `"attempt"`, `"ATTEMPT"`, 1), false},
		{"escaped id", `{"id":"g\u0031","tasks":[]}`, false},
		{"tasks twice", `{"tasks":[{"id":"a","state":"READY"}],"tasks":[{"id":"b"}]}`, false},
		{"counts twice", `{"counts":{"READY":1},"counts":{"FAILED":2}}`, true},
		{"fractional attempt", `{"tasks":[{"attempt":1.0}]}`, false},
		{"attempt as a string", `{"tasks":[{"attempt":"1"}]}`, false},
		{"huge round", `{"tasks":[{"round":123456789012345678901234567890}]}`, false},
		{"offset time", `{"tasks":[{"started_at":"2026-12-05T01:33:56+01:00"}]}`, false},
		{"bad time", `{"tasks":[{"started_at":"2026-12-05 01:33:56Z"}]}`, false},
		{"invalid utf-8", "{\"id\":\"g\xff\"}", false},
		{"truncated", s[:len(s)/2], false},
		{"trailing", s + "x", false},
		{"two values", s + " {}", false},
		{"bad literal", `{"tasks":[{"result":nul}]}`, false},
		{"bad number", `{"tasks":[{"result":01}]}`, false},
		{"bad escape", `{"tasks":[{"result":"\x"}]}`, false},
		{"control character", "{\"tasks\":[{\"result\":\"a\nb\"}]}", false},
		{"not an object", `[1]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fast := sameAsJSON(t, []byte(tc.doc)); tc.fast && !fast {
				t.Errorf("decodeGroup did not read %q", tc.doc)
			}
		})
	}
}

// TestClientGroupSlowPath: an answer decodeGroup leaves alone is decoded
// by encoding/json, and one neither reads is an error.
func TestClientGroupSlowPath(t *testing.T) {
	for _, tc := range []struct {
		body, id, err string
	}{
		{`{"ID":"g1","tasks":[{"id":"g1.0","state":"SUCCEEDED"}]}`, "g1", ""},
		{`{"id":"g\u0032"}`, "g2", ""},
		{`{"id":"g3",`, "", "decode"},
	} {
		c := fakeJSONClient(t, tc.body)
		g, err := c.Group(t.Context(), "g", 0)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v; want %q", tc.body, err, tc.err)
			}
			continue
		}
		if err != nil || g.ID != tc.id {
			t.Errorf("%s: Group = %+v, %v; want id %s", tc.body, g, err, tc.id)
		}
	}
}

func FuzzDecodeGroup(f *testing.F) {
	f.Add(answer(f, 3))
	f.Add([]byte(`{"x":{"y":[1,{"z":"\"\\\/\b\f\n\r\t\u00e9"}]},"id":"g","counts":{"A":1},"tasks":[{"id":"a","n":-0.5e-3,"error":"e"}]}`))
	f.Add([]byte(`{"tasks":[{"started_at":"2026-12-05T01:33:56.1Z","round":-0,"error":{"a":null}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsJSON(t, b)
	})
}

// BenchmarkDecodeGroup: a W1 group's answer (1,000 tasks), read by
// decodeGroup and by encoding/json.
func BenchmarkDecodeGroup(b *testing.B) {
	doc := answer(b, 1000)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			var g Group
			if !decodeGroup(doc, &g) {
				b.Fatal("not read")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			var g Group
			if err := json.Unmarshal(doc, &g); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fakeJSONClient is a Client of a server that answers every request
// with body.
func fakeJSONClient(t *testing.T, body string) *Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return NewClient(strings.TrimPrefix(srv.URL, "http://"), srv.Client())
}
