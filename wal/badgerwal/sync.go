package badgerwal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Badger's DB.Sync msyncs two files: the active memtable's WAL, which holds
// every write, and the current value-log file, which needle never writes
// (chunkSize keeps every value below the value threshold). On ext4 an
// msync of a clean mapping still waits for a journal commit and a device
// cache flush: measured with strace under BenchmarkSingleSync, the
// memtable's msync took 0.82 ms at the median and the value log's 0.26 ms,
// on the critical path of every commit. memSync syncs the memtable WAL
// files alone.
//
// Badger names a memtable's WAL file "%05d.mem" after a counter that grows
// by one per memtable (memtable.go: mtFilePath, newMemTable); a new one is
// created only by a write that finds the active one full. So the active
// file is the highest number, and the files written since the last sync
// are those from the highest synced then to the highest now. Older ones
// were synced while they were the highest, and Badger deletes one only
// after flushing it to an L0 table, which it msyncs. An fdatasync of the
// file is what msync(MS_SYNC) of its shared mapping does in Linux (both
// are vfs_fsync_range with datasync), so durability is Badger's own.
// TestSyncReachesMemtableFile checks the naming on the Badger in go.mod;
// if no memtable file is found (another naming, an in-memory database),
// memSync falls back to DB.Sync.
//
// A memSync is used under the Log's lock.
type memSync struct {
	dir string
	// fid is the highest memtable file number known, f its open file
	// (nil until the first sync), synced the highest synced so far.
	fid, synced int
	f           *os.File
	// fallback: no memtable file was found at open; use DB.Sync.
	fallback bool
}

const memFileExt = ".mem"

// openMemSync finds the highest memtable file in dir (Badger created the
// active one in Open).
func openMemSync(dir string) *memSync {
	ms := &memSync{dir: dir, fallback: true}
	if dir == "" {
		return ms
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ms
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, memFileExt) {
			continue
		}
		fid, err := strconv.Atoi(strings.TrimSuffix(name, memFileExt))
		if err != nil || fid < 0 {
			continue
		}
		if ms.fallback || fid > ms.fid {
			ms.fid, ms.fallback = fid, false
		}
	}
	ms.synced = ms.fid
	return ms
}

func (ms *memSync) path(fid int) string {
	return filepath.Join(ms.dir, fmt.Sprintf("%05d%s", fid, memFileExt))
}

// sync makes every write so far durable: it fdatasyncs each memtable file
// from the highest synced last time to the highest now, looking for newer
// files each time (a memtable may rotate more than once between two
// syncs: a split Append, the value-log GC's writes).
func (ms *memSync) sync() error {
	for {
		if _, err := os.Stat(ms.path(ms.fid + 1)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			return err
		}
		ms.fid++
	}
	for fid := ms.synced; fid < ms.fid; fid++ {
		if err := syncFile(ms.path(fid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err // a missing one was flushed to an L0 table
		}
	}
	if ms.f != nil && ms.f.Name() != ms.path(ms.fid) {
		_ = ms.f.Close()
		ms.f = nil
	}
	if ms.f == nil {
		f, err := os.OpenFile(ms.path(ms.fid), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		ms.f = f
	}
	if err := datasync(ms.f); err != nil {
		return err
	}
	ms.synced = ms.fid
	return nil
}

// syncFile fdatasyncs the file at path.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = datasync(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (ms *memSync) close() {
	if ms.f != nil {
		_ = ms.f.Close()
		ms.f = nil
	}
}
