package flagnear

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// The flag package answers a value it cannot read with "invalid value "5"
// for flag -worker-ttl: parse error": not what it wanted. ExplainValue
// says it ("want a duration such as 30s, 5m or 1h30m"), for the command
// line (Explain), an environment variable and a config file line alike.

// The texts of the flag package's errors for a value a built-in flag
// cannot read (strconv's and time's own errors are hidden behind them).
const (
	parseError = "parse error"
	rangeError = "value out of range"
)

// valueError is a flag value's error said with what the flag wants; it
// wraps the flag package's.
type valueError struct {
	msg string
	err error
}

func (e *valueError) Error() string { return e.msg }
func (e *valueError) Unwrap() error { return e.err }

// Want says what a value of f looks like, "" for a flag whose type is not
// one of the flag package's (its own errors say it).
func Want(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return `a duration such as "30s", "5m" or "1h30m" (a number and a unit: ms, s, m, h)`
	case int, int64:
		return "an integer"
	case uint, uint64:
		return "a non-negative integer"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return ""
}

// ExplainValue returns err, the error of setting f to a value, with what
// f wants when err is the flag package's bare "parse error" or "value out
// of range"; any other error is returned as it is.
func ExplainValue(f *flag.Flag, err error) error {
	if err == nil {
		return nil
	}
	want := Want(f)
	switch {
	case want == "":
		return err
	case err.Error() == parseError:
		return &valueError{msg: "want " + want, err: err}
	case err.Error() == rangeError:
		return &valueError{msg: "out of range: want " + want + " that fits", err: err}
	}
	return err
}

// explainInvalid rewrites the flag package's error for a value given on
// the command line, "invalid value "x" for flag -n: parse error" (or
// "invalid boolean value"), as `invalid value "x" for --n: want ...`, or
// with the flag's own error after the colon when the flag has no want.
// ok is false for any other error.
func explainInvalid(fs *flag.FlagSet, err error) (error, bool) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "invalid value ") && !strings.HasPrefix(msg, "invalid boolean value ") {
		return err, false
	}
	sep := " for flag -"
	if strings.HasPrefix(msg, "invalid boolean value ") {
		sep = " for -"
	}
	at := strings.LastIndex(msg, sep)
	if at < 0 {
		return err, false
	}
	name, inner, ok := strings.Cut(msg[at+len(sep):], ": ")
	f := fs.Lookup(name)
	if !ok || f == nil {
		return err, false
	}
	// A flag whose own error says what it wants (--label's "not
	// key=value") keeps it, spelled as the others: "for --label", not the
	// flag package's "for flag -label".
	ve := ExplainValue(f, errors.New(inner))
	value := strings.TrimPrefix(strings.TrimPrefix(msg[:at], "invalid boolean value "), "invalid value ")
	return &valueError{msg: fmt.Sprintf("invalid value %s for --%s: %v", value, name, ve), err: err}, true
}
