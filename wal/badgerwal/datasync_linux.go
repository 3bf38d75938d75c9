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
