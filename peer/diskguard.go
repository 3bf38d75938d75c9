package peer

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/needle-mesh/needle/peer/api"
)

// DefaultMinFreeDisk is the space a peer keeps free under its data dir by
// refusing new work (Config.MinFreeDisk): room for Badger to fill the
// memtable it writes (its file, mapped, is twice the memtable's 128 MiB and
// allocated as it is written) and flush it, while outcomes of the work
// already taken keep coming.
const DefaultMinFreeDisk = 512 << 20

// diskCheckEvery is how long a reading of the free space is trusted: a
// submission costs a statfs at most this often.
const diskCheckEvery = 100 * time.Millisecond

// diskGuard refuses new work while the filesystem of the data dir has less
// than min bytes free for an unprivileged writer. Badger writes its
// memtable through a shared mapping of a sparse file: on a full filesystem
// the write faults (SIGBUS) and the process dies where it stands, so the
// peer stops taking submissions well before, and only the outcomes,
// leases and replication of work already acknowledged write on.
type diskGuard struct {
	dir  string
	min  uint64 // 0: no check
	free func(dir string) (avail, total uint64, err error)
	// warn is told when the guard starts and stops refusing.
	warn func(low bool, avail, min uint64)

	mu    sync.Mutex
	at    time.Time // last reading
	avail uint64
	low   bool
}

// statfsFree is the space of dir's filesystem: available to unprivileged
// writers, and in total.
func statfsFree(dir string) (avail, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// newDiskGuard guards dir at min bytes, capped at a quarter of its
// filesystem (a small filesystem would refuse everything otherwise); min 0
// or a filesystem it cannot read turns the check off.
func newDiskGuard(dir string, min int64, free func(string) (uint64, uint64, error), warn func(bool, uint64, uint64)) *diskGuard {
	g := &diskGuard{dir: dir, free: free, warn: warn}
	if min <= 0 || dir == "" {
		return g
	}
	_, total, err := free(dir)
	if err != nil {
		return g
	}
	g.min = minU(uint64(min), total/4)
	return g
}

func minU(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}

// Min is the free space the guard keeps, bytes (0: none).
func (g *diskGuard) Min() uint64 { return g.min }

// check returns an error wrapping api.ErrInsufficientStorage, naming peer
// who, when the data dir's filesystem has less than the guard's minimum free, as read at most
// diskCheckEvery ago. A reading that fails lets the work through (the
// writes will say what is wrong).
func (g *diskGuard) check(now time.Time, who string) error {
	if g == nil || g.min == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() || now.Sub(g.at) >= diskCheckEvery || now.Before(g.at) {
		avail, _, err := g.free(g.dir)
		g.at = now
		if err == nil {
			g.avail = avail
			// It refuses under min and takes work again at an eighth
			// over it, so that a reading moving around min (a memtable
			// filling, a compaction freeing) does not flap.
			low := avail < g.min || g.low && avail < g.min+g.min/8
			if low != g.low {
				g.low = low
				if g.warn != nil {
					g.warn(low, avail, g.min)
				}
			}
		}
	}
	if !g.low {
		return nil
	}
	return &noSpaceError{"disk", fmt.Sprintf("peer %s, the group's owner, has %s free under its data dir, under its --min-free-disk of %s; "+
		"it takes no new work until space is freed (finished groups go after --retention) and runs on the work it has",
		who, mib(g.avail), mib(g.min))}
}

// noSpaceError is a guard's refusal: its text is the message the client
// reads, and it is api.ErrInsufficientStorage.
type noSpaceError struct {
	reason string // disk, memory: needle_submissions_refused_total's label
	msg    string
}

func (e *noSpaceError) Error() string { return e.msg }

func (e *noSpaceError) Is(target error) bool { return target == api.ErrInsufficientStorage }

// diskWarn logs the guard's changes of mind.
func (p *Peer) diskWarn(low bool, avail, min uint64) {
	if low {
		p.log.Warn("data dir short of disk space: refusing new work", "free", mib(avail), "min_free_disk", mib(min), "dir", p.cfg.DataDir)
		return
	}
	p.log.Info("data dir has disk space again: taking new work", "free", mib(avail), "min_free_disk", mib(min))
}

// mib prints bytes in MiB.
func mib(b uint64) string {
	return fmt.Sprintf("%d MiB", b>>20)
}
