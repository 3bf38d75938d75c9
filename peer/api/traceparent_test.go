package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// TestTraceparentHeader: a well-formed W3C traceparent replaces the body's
// trace; anything else leaves it as it was.
func TestTraceparentHeader(t *testing.T) {
	const ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tt := range []struct {
		header string
		valid  bool
	}{
		{ok, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true}, // not sampled
		{strings.ToUpper(ok), false},
		{"ff" + ok[2:], false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{ok + "-extra", false},
		{ok[:54], false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"", false},
	} {
		spec := &shard.GroupSpec{Trace: "from-the-body"}
		setTraceparent(spec, http.Header{"Traceparent": {tt.header}})
		want := "from-the-body"
		if tt.valid {
			want = tt.header
		}
		if spec.Trace != want {
			t.Errorf("traceparent %q: trace %q; want %q", tt.header, spec.Trace, want)
		}
	}
}
