package bad

import (
	"testing"
	"time"
)

// A test file may start goroutines and read the clock: not reported.
func TestSpawn(t *testing.T) {
	done := make(chan time.Time)
	go func() { done <- time.Now() }()
	<-done
}
