package peer

import (
	"testing"
	"time"
)

func TestRateLimiter(t *testing.T) {
	rl := newRateLimiter(10) // burst 20
	now := time.Unix(0, 0)
	allowed := 0
	for range 50 {
		if rl.allow("10.0.0.1:5555", now) {
			allowed++
		}
	}
	if allowed != 20 {
		t.Errorf("burst allowed %d; want 20", allowed)
	}
	if !rl.allow("10.0.0.2:1", now) {
		t.Error("another client was limited")
	}
	if !rl.allow("10.0.0.1:6666", now.Add(time.Second)) {
		t.Error("the bucket did not refill after a second")
	}
}

func TestLoopbackOnly(t *testing.T) {
	tests := []struct {
		in, want string
		changed  bool
	}{
		{"127.0.0.1:7070", "127.0.0.1:7070", false},
		{"localhost:7070", "localhost:7070", false},
		{"[::1]:7070", "[::1]:7070", false},
		{"0.0.0.0:7070", "127.0.0.1:7070", true},
		{":7070", "127.0.0.1:7070", true},
		{"10.1.2.3:80", "127.0.0.1:80", true},
	}
	for _, tt := range tests {
		got, changed := loopbackOnly(tt.in)
		if got != tt.want || changed != tt.changed {
			t.Errorf("loopbackOnly(%q) = %q, %v; want %q, %v", tt.in, got, changed, tt.want, tt.changed)
		}
	}
}
