package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// w1Spec is a W1 group's body: n echo tasks with bench's payloads.
func w1Spec(n int) GroupSpec {
	g := GroupSpec{Mode: "parallel"}
	for i := range n {
		g.Tasks = append(g.Tasks, TaskSpec{Name: fmt.Sprintf("t%d", i), Handler: "echo",
			Payload: json.RawMessage(fmt.Sprintf(`{"w":"w1","rep":1,"i":%d}`, i))})
	}
	return g
}

func TestAppendGroupSpecMatchesJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    GroupSpec
		fast bool // appendGroupSpec must write it
	}{
		{"w1", w1Spec(30), true},
		{"no tasks", GroupSpec{Mode: "parallel"}, true},
		{"empty tasks", GroupSpec{Mode: "dag", Tasks: []TaskSpec{}}, true},
		{"no name, no payload", GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Handler: "echo"}, {Handler: "sleep", Payload: json.RawMessage(`{"ms":20}`)}}}, true},
		{"every plain byte", GroupSpec{Mode: "m", Tasks: []TaskSpec{{Name: " !#$%'()*+,-./09:;=?@AZ[]^_`az{|}~", Handler: "h", Payload: json.RawMessage(`["x",1,-2.5e3,true,null,{}]`)}}}, true},
		{"quote in a name", GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Name: `a"b`, Handler: "echo"}}}, false},
		{"html in a handler", GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Handler: "<echo>"}}}, false},
		{"unicode in a mode", GroupSpec{Mode: "parallél"}, false},
		{"spaced payload", GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Handler: "echo", Payload: json.RawMessage(`{"a": 1}`)}}}, false},
		{"html in a payload", GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Handler: "echo", Payload: json.RawMessage(`"a&b"`)}}}, false},
		{"control in a name", GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Name: "a\tb", Handler: "echo"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := appendGroupSpec(nil, &tc.g)
			if tc.fast && !ok {
				t.Fatalf("appendGroupSpec did not write %+v", tc.g)
			}
			if ok && !bytes.Equal(got, want) {
				t.Fatalf("appendGroupSpec wrote\n%s\njson.Marshal\n%s", got, want)
			}
			body, err := encodeBody(tc.g)
			if err != nil || !bytes.Equal(body, want) {
				t.Fatalf("encodeBody = %s, %v; want %s", body, err, want)
			}
		})
	}
	// An invalid payload json.Marshal refuses is not written either.
	bad := GroupSpec{Mode: "parallel", Tasks: []TaskSpec{{Handler: "echo", Payload: json.RawMessage(`{"a":`)}}}
	if _, ok := appendGroupSpec(nil, &bad); ok {
		t.Fatal("appendGroupSpec wrote an invalid payload")
	}
	if _, err := encodeBody(bad); err == nil {
		t.Fatal("encodeBody took an invalid payload")
	}
}

// submittedAnswer is POST /v1/groups' answer for w1Spec(n), as the API
// writes it.
func submittedAnswer(tb testing.TB, n int) []byte {
	tb.Helper()
	s := Submitted{Group: "gdcf7a47ae133bb110b84e87e", Tasks: map[string]string{}}
	for i := range n {
		s.Tasks[fmt.Sprintf("t%d", i)] = fmt.Sprintf("%s.%d", s.Group, i)
	}
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sameSubmitted checks decodeSubmitted's contract on b (sameAsJSON's).
func sameSubmitted(tb testing.TB, b []byte) (fast bool) {
	tb.Helper()
	var got, want Submitted
	own := append([]byte(nil), b...)
	if !decodeSubmitted(own, &got) {
		return false
	}
	for i := range own {
		own[i] = 'X'
	}
	if err := json.Unmarshal(b, &want); err != nil {
		tb.Fatalf("decodeSubmitted read what encoding/json refuses (%v): %.200q", err, b)
	}
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("decodeSubmitted read %.300q as\n%+v\nencoding/json as\n%+v", b, got, want)
	}
	return true
}

func TestDecodeSubmittedMatchesJSON(t *testing.T) {
	canonical := submittedAnswer(t, 40)
	s := string(canonical)
	for _, tc := range []struct {
		name string
		doc  string
		fast bool
	}{
		{"answer", s, true},
		{"no tasks", string(submittedAnswer(t, 0)), true},
		{"spaces", " {\n\"group\" : \"g1\" , \"tasks\" : { \"a\" : \"g1.0\" } }\n", true},
		{"nulls", `{"group":null,"tasks":null}`, true},
		{"unknown keys", `{"x":[1,{"y":"\n"}],"group":"g","created":true,"tasks":{}}`, true},
		{"a name twice", `{"tasks":{"a":"g.0","a":"g.1"}}`, true},
		{"tasks twice", `{"tasks":{"a":"g.0"},"tasks":{"b":"g.1"}}`, true},
		{"null id", `{"tasks":{"a":null}}`, false},
		{"key in another case", strings.Replace(s, `"group"`, `"Group"`, 1), false},
		{"escaped name", `{"tasks":{"\u0061":"g.0"}}`, false},
		{"escaped id", `{"tasks":{"a":"g\u002e0"}}`, false},
		{"id not a string", `{"tasks":{"a":7}}`, false},
		{"invalid utf-8", "{\"group\":\"g\xff\"}", false},
		{"truncated", s[:len(s)/2], false},
		{"trailing", s + "x", false},
		{"not an object", `["g"]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fast := sameSubmitted(t, []byte(tc.doc)); tc.fast && !fast {
				t.Errorf("decodeSubmitted did not read %q", tc.doc)
			}
		})
	}
}

// TestClientSubmitGroup: a group submitted through the client reaches the
// peer as json.Marshal writes it, and its answer reads back, by the fast
// path and by encoding/json.
func TestClientSubmitGroup(t *testing.T) {
	g := w1Spec(3)
	want, _ := json.Marshal(g)
	for _, answer := range []string{
		`{"group":"g1","tasks":{"t0":"g1.0","t1":"g1.1","t2":"g1.2"}}`,
		`{"Group":"g1","tasks":{"t0":"g1.0","t1":"g1.1","t2":"g1.2"}}`, // encoding/json's
	} {
		c, got := fakeSubmitClient(t, answer)
		s, err := c.SubmitGroup(t.Context(), g)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(*got, want) {
			t.Fatalf("the peer got\n%s\nwant\n%s", *got, want)
		}
		if s.Group != "g1" || len(s.Tasks) != 3 || s.Tasks["t2"] != "g1.2" {
			t.Fatalf("SubmitGroup = %+v", s)
		}
	}
}

func FuzzDecodeSubmitted(f *testing.F) {
	f.Add(submittedAnswer(f, 3))
	f.Add([]byte(`{"x":{"y":[1,{"z":"\"\\\/\b\f\n\r\t\u00e9"}]},"group":"g","tasks":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameSubmitted(t, b)
	})
}

// BenchmarkSubmitJSON: a W1 group's body written and its answer read,
// by hand and by encoding/json.
func BenchmarkSubmitJSON(b *testing.B) {
	g := w1Spec(1000)
	doc := submittedAnswer(b, 1000)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := appendGroupSpec(make([]byte, 0, specSize(&g)), &g); !ok {
				b.Fatal("not written")
			}
			var s Submitted
			if !decodeSubmitted(doc, &s) {
				b.Fatal("not read")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(g); err != nil {
				b.Fatal(err)
			}
			var s Submitted
			if err := json.Unmarshal(doc, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fakeSubmitClient is a client of a server that answers body to every
// request and keeps the last request's body in *got.
func fakeSubmitClient(t *testing.T, body string) (*Client, *[]byte) {
	got := new([]byte)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return NewClient(strings.TrimPrefix(srv.URL, "http://"), srv.Client()), got
}
