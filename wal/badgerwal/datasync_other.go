//go:build !linux

package badgerwal

import "os"

// datasync is fsync(2) where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }
