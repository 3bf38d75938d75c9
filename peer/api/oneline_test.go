package api

import (
	"errors"
	"testing"
)

// An error that joins others is answered on one line, each part once.
func TestErrorMessageOnOneLine(t *testing.T) {
	err := errors.Join(ErrUnavailable, errors.Join(ErrUnavailable, errors.New("peer: unavailable")))
	if got, want := ErrorOf(err).Message, "api: unavailable; peer: unavailable"; got != want {
		t.Fatalf("message = %q; want %q", got, want)
	}
	if got := NewError(CodeUnavailable, "", "a\n\nb\na").Message; got != "a; b" {
		t.Fatalf("message = %q; want %q", got, "a; b")
	}
	if got := ErrorOf(errors.New("plain")).Message; got != "plain" {
		t.Fatalf("message = %q", got)
	}
}
