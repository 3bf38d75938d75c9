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
