package node

import (
	"slices"
	"testing"
)

// The record of forgotten peers round-trips, and decoding skips this
// peer's own id, empty lines and ids ValidID refuses.
func TestForgottenRecord(t *testing.T) {
	rec := encodeForgotten(map[string]bool{"n3": true, "n1": true, "n2": true})
	if string(rec) != "n1\nn2\nn3\n" {
		t.Fatalf("record %q; want the ids sorted, one per line", rec)
	}
	if got := decodeForgotten(rec, "n9", nil); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("decoded %v", got)
	}
	valid := func(id string) bool { return id != "bad" }
	if got := decodeForgotten([]byte("n1\n\nbad\nn2\nme"), "me", valid); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("decoded %v; want n1 n2 (empty, invalid and self skipped)", got)
	}
	if got := decodeForgotten(nil, "me", nil); len(got) != 0 {
		t.Fatalf("decoded %v from no record", got)
	}
}
