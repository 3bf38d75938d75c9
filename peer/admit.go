package peer

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"golang.org/x/sys/unix"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// An owner takes no new work while it is short of disk space or memory:
// it refuses the submissions of groups it owns (507 insufficient_storage)
// and runs on the work it has; leases, outcomes and replication of work
// already acknowledged write on (docs/decisions.md).
//
// Disk: Badger writes its memtable through a shared mapping of a sparse
// file, so on a full filesystem a write faults (SIGBUS) and the process
// dies where it stands; the peer stops taking submissions well before.
// Memory: a peer holds its groups, payloads and results with them, until
// retention removes them, and so do their replicas: a client submitting
// without end would grow it until the kernel killed the process.

// DefaultMinFreeDisk is the space a peer keeps free under its data dir by
// refusing new work (Config.MinFreeDisk): room for Badger to fill the
// memtable it writes (its file, mapped, is twice the memtable's 128 MiB and
// allocated as it is written) and flush it, while outcomes of the work
// already taken keep coming.
const DefaultMinFreeDisk = 512 << 20

// markEvery is how long a mark trusts a reading: a submission costs a
// statfs (or a read of the heap's metrics) at most this often.
const markEvery = 100 * time.Millisecond

// A mark is a limit on one reading (the free disk space, the live heap)
// past which the peer takes no new work. Once past, the reading must come
// back an eighth of the limit inside it before work is taken again, so
// that a reading moving around the limit (a memtable filling, a compaction
// freeing, a collection) does not flap.
type mark struct {
	limit uint64 // 0: no check
	above bool   // past is above the limit (the heap), not below (free space)
	read  func() (uint64, error)
	// warn is told when the mark is crossed, either way.
	warn func(past bool, v, limit uint64)

	mu   sync.Mutex
	at   time.Time // of the last reading
	v    uint64
	past bool
}

// check reports whether the reading, taken at most markEvery ago, is past
// the limit, with the reading and the limit. A reading that fails keeps
// the last one (the writes will say what is wrong). A nil mark, or one
// without a limit, is never past.
func (m *mark) check(now time.Time) (past bool, v, limit uint64) {
	if m == nil {
		return false, 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limit == 0 {
		return false, 0, 0
	}
	if m.at.IsZero() || now.Sub(m.at) >= markEvery || now.Before(m.at) {
		m.at = now
		if v, err := m.read(); err == nil {
			m.v = v
			if past := m.crossed(v); past != m.past {
				m.past = past
				if m.warn != nil {
					m.warn(past, v, m.limit)
				}
			}
		}
	}
	return m.past, m.v, m.limit
}

// crossed says whether reading v is past the limit, given where the mark
// was.
func (m *mark) crossed(v uint64) bool {
	slack := m.limit / 8
	if m.above {
		return v > m.limit || m.past && v > m.limit-slack
	}
	return v < m.limit || m.past && v < m.limit+slack
}

// newDiskMark keeps keep bytes free under dir, at most a quarter of its
// filesystem (a small one would refuse everything otherwise); keep <= 0
// or a filesystem free cannot read turn the check off.
func newDiskMark(dir string, keep int64, free func(dir string) (avail, total uint64, err error), warn func(bool, uint64, uint64)) *mark {
	m := &mark{warn: warn, read: func() (uint64, error) {
		avail, _, err := free(dir)
		return avail, err
	}}
	if keep <= 0 || dir == "" {
		return m
	}
	if _, total, err := free(dir); err == nil {
		m.limit = min(uint64(keep), total/4)
	}
	return m
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

// newHeapMark bounds the live heap at max bytes: 0 is half of mem (no
// check when mem is unknown), negative no check.
func newHeapMark(max int64, mem uint64, live func() uint64, warn func(bool, uint64, uint64)) *mark {
	m := &mark{above: true, warn: warn, read: func() (uint64, error) { return live(), nil }}
	switch {
	case max > 0:
		m.limit = uint64(max)
	case max == 0:
		m.limit = mem / 2
	}
	return m
}

// liveHeap reads the live heap of the last collection.
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// memoryAvailable is the memory this process may use: the machine's, or
// less where its cgroup (v2 or v1, or an ancestor: cgroupMemoryLimit) or
// GOMEMLIMIT sets a limit; 0 when unknown.
func memoryAvailable() uint64 {
	var mem uint64
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		mem = uint64(si.Totalram) * uint64(si.Unit)
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	if v := cgroupMemoryLimit("/sys/fs/cgroup", self); v > 0 && (mem == 0 || v < mem) {
		mem = v
	}
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 && (mem == 0 || uint64(l) < mem) {
		mem = uint64(l)
	}
	return mem
}

// noSpaceError is an owner's refusal of new work: its text is the message
// the client reads, and it is api.ErrInsufficientStorage.
type noSpaceError struct {
	reason string // disk, memory: needle_submissions_refused_total's label
	msg    string
}

func (e *noSpaceError) Error() string { return e.msg }

func (e *noSpaceError) Is(target error) bool { return target == api.ErrInsufficientStorage }

// refusal is the error of peer who, past its disk mark (free bytes free
// under limit) or its heap mark (live bytes over limit).
func refusal(who, reason string, v, limit uint64) error {
	if reason == "disk" {
		return &noSpaceError{reason, fmt.Sprintf("peer %s, the group's owner, has %s free under its data dir, under its --min-free-disk of %s; "+
			"it takes no new work until space is freed (finished groups go after --retention) and runs on the work it has",
			who, mib(v), mib(limit))}
	}
	return &noSpaceError{reason, fmt.Sprintf("peer %s, the group's owner, holds %s of live heap, over its --max-heap of %s; "+
		"it takes no new work until finished groups go (--retention) and runs on the work it has",
		who, mib(v), mib(limit))}
}

// admit returns why this peer takes no new work now (it is short of disk
// space or of memory), nil when it does.
func (p *Peer) admit(now time.Time) error {
	if past, v, limit := p.disk.check(now); past {
		return refusal(p.ID(), "disk", v, limit)
	}
	if past, v, limit := p.heap.check(now); past {
		return refusal(p.ID(), "memory", v, limit)
	}
	return nil
}

// dropAppends returns msgs without the appends and snapshots a leader
// sent, when this peer's disk has under half its --min-free-disk free: a
// follower that wrote them could fill its filesystem and die of SIGBUS
// (the owner's refusal of new work does not stop its replicas' writes
// when their filesystems are fuller). Raft takes a dropped append as a
// lost message: the partition commits on the other replicas, and this one
// catches up once space is freed.
func (p *Peer) dropAppends(msgs []node.RaftMsg) []node.RaftMsg {
	past, v, limit := p.disk.check(time.Now())
	if !past || v >= limit/2 {
		return msgs
	}
	kept := msgs[:0]
	dropped := 0
	for _, rm := range msgs {
		if t := rm.Msg.Type; t == raftpb.MsgApp || t == raftpb.MsgSnap {
			dropped++
			continue
		}
		kept = append(kept, rm)
	}
	if dropped > 0 {
		p.metrics.droppedAppends.Add(float64(dropped))
	}
	return kept
}

// refuse counts a submission refused with err, one of admit's, and returns
// err.
func (p *Peer) refuse(err error) error {
	var ns *noSpaceError
	if errors.As(err, &ns) {
		p.metrics.refusedWork.WithLabelValues(ns.reason).Inc()
	}
	return err
}

// diskWarn and heapWarn log the marks' changes of mind.
func (p *Peer) diskWarn(past bool, avail, limit uint64) {
	if past {
		p.log.Warn("data dir short of disk space: refusing new work", "free", mib(avail), "min_free_disk", mib(limit), "dir", p.cfg.DataDir)
		return
	}
	p.log.Info("data dir has disk space again: taking new work", "free", mib(avail), "min_free_disk", mib(limit))
}

func (p *Peer) heapWarn(past bool, live, limit uint64) {
	if past {
		p.log.Warn("live heap over --max-heap: refusing new work", "live_heap", mib(live), "max_heap", mib(limit))
		return
	}
	p.log.Info("live heap under --max-heap again: taking new work", "live_heap", mib(live), "max_heap", mib(limit))
}

// mib prints bytes in MiB.
func mib(b uint64) string {
	return fmt.Sprintf("%d MiB", b>>20)
}
