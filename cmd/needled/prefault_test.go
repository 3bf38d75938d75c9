package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/internal/hugepages"
)

// TestPrefaultHeapOnlyOnHugePages checks when needled faults its heap in
// at start: where the heap is on huge pages (advised, or the kernel's
// always), not where it is not or --huge-pages=false left it alone.
func TestPrefaultHeapOnlyOnHugePages(t *testing.T) {
	for _, c := range []struct {
		name string
		r    *hugepages.Result
		want bool
	}{
		{"huge pages off (--huge-pages=false)", nil, false},
		{"kernel never", &hugepages.Result{Mode: "never", Why: "never"}, false},
		{"madvise, not advised", &hugepages.Result{Mode: "madvise", Why: "GODEBUG=disablethp=1"}, false},
		{"madvise, advised", &hugepages.Result{Mode: "madvise", Advised: true}, true},
		{"kernel always", &hugepages.Result{Mode: "always", Why: "always"}, true},
	} {
		var buf bytes.Buffer
		got := prefaultHeap(c.r, slog.New(slog.NewTextHandler(&buf, nil)))
		if got != c.want {
			t.Errorf("%s: prefaultHeap = %v, want %v", c.name, got, c.want)
		}
		if logged := strings.Contains(buf.String(), "heap faulted in ahead"); logged != c.want {
			t.Errorf("%s: logged %q, want the line %v", c.name, buf.String(), c.want)
		}
	}
}
