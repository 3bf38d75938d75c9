package badgerwal

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync(2), what msync(MS_SYNC) of a shared mapping does.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// preallocate makes f size bytes long, its blocks allocated (read as
// zeros) where the file system can; elsewhere a sparse file.
func preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if err != unix.EOPNOTSUPP && err != unix.ENOSYS {
		return err
	}
	return f.Truncate(size)
}
