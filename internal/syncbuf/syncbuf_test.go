package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Every line written from many goroutines at once is there, whole (the
// race detector checks the lock).
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "g%d line %d\n", g, i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines; want 800", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	for g := range 8 {
		for i := range 100 {
			if l := fmt.Sprintf("g%d line %d", g, i); !seen[l] {
				t.Fatalf("line %q missing or torn", l)
			}
		}
	}
}
