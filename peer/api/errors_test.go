package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// TestErrorVocabulary: every kind of the table has its status under its
// code (what a forwarded answer is rebuilt with), and an *Error of a code
// matches the code's sentinel, as the local error does.
func TestErrorVocabulary(t *testing.T) {
	for _, k := range errorTable {
		if got := StatusOf(k.code); got != k.status {
			t.Errorf("StatusOf(%s) = %d; the table says %d", k.code, got, k.status)
		}
	}
	for code, s := range codeSentinel {
		local := ErrorOf(fmt.Errorf("x: %w", s))
		if local.Code != code {
			t.Errorf("ErrorOf(%v) code %s; want %s", s, local.Code, code)
		}
		if !errors.Is(NewError(code, "", "x"), s) {
			t.Errorf("NewError(%s) does not match %v", code, s)
		}
		if errors.Is(NewError(CodeInternal, "", "x"), s) {
			t.Errorf("an internal error matches %v", s)
		}
	}
	if e := NewError("made_up", "", "x"); e.Status != http.StatusInternalServerError {
		t.Errorf("unknown code status %d; want 500", e.Status)
	}
	if e, internal := toError(NewError(CodeInternal, "", "secret")); !internal || e.Message != "internal error" {
		t.Errorf("forwarded internal error = %+v, %v; want hidden and logged", e, internal)
	}
	if e := ErrorOf(&shard.FieldError{Task: 2, Field: "deps", Message: "m"}); e.Field != "tasks[2].deps" || e.Message != "tasks[2].deps: m" {
		t.Errorf("task field error = %+v", e)
	}
}
