package flagnear

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, n := range []string{"data", "http", "listen", "join", "max-wait", "api-token-file", "slots", "v"} {
		fs.String(n, "", "")
	}
	return fs
}

func TestNearest(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"data-dir", "data"}, // a hyphenated word added
		{"datadir", ""},      // too far, no hyphen
		{"htp", "http"},      // a letter missing
		{"lisen", "listen"},  // one
		{"Join", "join"},     // case
		{"wait", "max-wait"}, // a word missing at the start
		{"api-token", "api-token-file"},
		{"slot", "slots"},
		{"frobnicate", ""},
		{"x", "v"}, // distance 1 of a one-letter flag
		{"", ""},
	} {
		if got := Nearest(flags(), c.in); got != c.want {
			t.Errorf("Nearest(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

func TestExplain(t *testing.T) {
	fs := flags()
	err := fs.Parse([]string{"--data-dir", "/x"})
	if err == nil {
		t.Fatal("parse of an undefined flag succeeded")
	}
	got := Explain(fs, err)
	if !strings.HasSuffix(got.Error(), "(did you mean --data?)") || !errors.Is(got, err) {
		t.Errorf("Explain = %q; want the parse error with a suggestion of --data", got)
	}
	other := errors.New("invalid value")
	if Explain(fs, other) != other {
		t.Error("Explain changed an error that is not an undefined flag")
	}
	err = fs.Parse([]string{"-frobnicate"})
	if Explain(fs, err) != err {
		t.Errorf("Explain(%v) added a suggestion with no flag near", err)
	}
}

// A value a flag could not read is answered with what the flag wants; the
// flag package said "parse error" and no more.
func TestExplainValue(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("worker-ttl", 0, "")
	fs.Int("slots", 0, "")
	fs.Uint("n", 0, "")
	fs.Float64("ratio", 0, "")
	fs.Bool("wait", false, "")
	fs.Func("label", "", func(string) error { return errors.New("not key=value") })
	for _, c := range []struct{ args, want string }{
		{"--worker-ttl 5", `invalid value "5" for --worker-ttl: want a duration such as "30s", "5m" or "1h30m" (a number and a unit: ms, s, m, h)`},
		{"--slots x", `invalid value "x" for --slots: want an integer`},
		{"--slots 99999999999999999999", `invalid value "99999999999999999999" for --slots: out of range: want an integer that fits`},
		{"--n -1", `invalid value "-1" for --n: want a non-negative integer`},
		{"--ratio half", `invalid value "half" for --ratio: want a number`},
		{"--wait=maybe", `invalid value "maybe" for --wait: want true or false`},
		{"--label bad", `invalid value "bad" for --label: not key=value`}, // its own error says it, spelled as the others (it said "for flag -label")
	} {
		err := fs.Parse(strings.Fields(c.args))
		got := Explain(fs, err)
		if got == nil || got.Error() != c.want || !errors.Is(got, err) {
			t.Errorf("Explain(%s) = %v; want %s (wrapping %v)", c.args, got, c.want, err)
		}
	}
	// An environment variable's or a config file's value, set directly.
	f := fs.Lookup("worker-ttl")
	if err := ExplainValue(f, f.Value.Set("5")); err == nil || !strings.HasPrefix(err.Error(), "want a duration such as") {
		t.Errorf("ExplainValue(worker-ttl, 5) = %v; want what a duration looks like", err)
	}
	if err := ExplainValue(f, f.Value.Set("5s")); err != nil {
		t.Errorf("ExplainValue(worker-ttl, 5s) = %v; want nil", err)
	}
}
