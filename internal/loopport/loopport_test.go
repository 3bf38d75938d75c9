package loopport

import "testing"

// Free returns ports of the range, never one twice.
func TestFree(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		port, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if port < First || port > Last || seen[port] {
			t.Fatalf("Free = %d; want a port of %d-%d not returned before", port, First, Last)
		}
		seen[port] = true
	}
}
