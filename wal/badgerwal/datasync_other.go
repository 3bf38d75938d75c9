//go:build !linux

package badgerwal

import "os"

// datasync is fsync(2) where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }

// preallocate makes f size bytes long (a sparse file).
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
