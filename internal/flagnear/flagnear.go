// Package flagnear names the flag a mistyped one was probably meant to be,
// and what a flag wants of a value it could not read.
//
// The standard flag package answers an unknown flag with "flag provided but
// not defined: -data-dir" and nothing else; Explain adds "did you mean
// --data?" when a defined flag is close enough to be the likely intent.
package flagnear

import (
	"flag"
	"fmt"
	"strings"
)

// prefix is how the flag package starts its error for an undefined flag.
const prefix = "flag provided but not defined: -"

// Explain returns err with a suggestion of the defined flag of fs nearest
// to the undefined one err names, when there is one, and a value a flag
// of fs could not read with what the flag wants (ExplainValue); any other
// error (and an undefined flag with nothing near it) is returned as it is.
func Explain(fs *flag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := explainInvalid(fs, err); ok {
		return e
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	name := strings.TrimLeft(strings.TrimPrefix(err.Error(), prefix), "-")
	if near := Nearest(fs, name); near != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, near)
	}
	return err
}

// Nearest returns the flag of fs most likely meant by name, or "" when none
// is close: an edit distance of at most a third of the name (at least 1),
// or a name that is a defined flag plus or minus a hyphenated word
// (data-dir for data, max-wait for wait). Ties go to the first in
// lexical order, so the answer does not depend on map order.
func Nearest(fs *flag.FlagSet, name string) string {
	name = strings.ToLower(name)
	if name == "" {
		return ""
	}
	best, bestD := "", max(1, len(name)/3)+1
	fs.VisitAll(func(f *flag.Flag) {
		d := distance(name, f.Name)
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best != "" {
		return best
	}
	fs.VisitAll(func(f *flag.Flag) {
		if best == "" && len(f.Name) > 1 && wordOf(name, f.Name) {
			best = f.Name
		}
	})
	return best
}

// wordOf reports whether one of a and b is the other with hyphenated words
// added at its start or end.
func wordOf(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(a, b+"-") || strings.HasSuffix(a, "-"+b)
}

// distance is the Levenshtein distance of a and b (bytes; flag names are
// ASCII).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
