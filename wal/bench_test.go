package wal_test

import (
	"testing"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/waltest"
)

// BenchmarkMemoryGroupCommit is badgerwal's BenchmarkGroupCommit on Memory.
func BenchmarkMemoryGroupCommit(b *testing.B) { waltest.BenchCommits(b, wal.NewMemory(), 10, 10) }

// BenchmarkMemorySingleSync is badgerwal's BenchmarkSingleSync on Memory.
func BenchmarkMemorySingleSync(b *testing.B) { waltest.BenchCommits(b, wal.NewMemory(), 1, 1) }
