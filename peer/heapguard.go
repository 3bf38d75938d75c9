package peer

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// heapGuard refuses new work while the live heap (what the last collection
// kept) is over max bytes. A peer holds its partitions' groups in memory,
// payloads and results with them, until retention removes them: a client
// that submits without end would otherwise grow it until the kernel kills
// the process, and its replicas with it, which hold the same groups.
type heapGuard struct {
	max  uint64 // 0: no check
	live func() uint64
	warn func(over bool, live, max uint64)

	mu   sync.Mutex
	at   time.Time
	seen uint64
	over bool
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
// less where a cgroup (v2) or GOMEMLIMIT sets a limit; 0 when unknown.
func memoryAvailable() uint64 {
	var mem uint64
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		mem = uint64(si.Totalram) * uint64(si.Unit)
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && (mem == 0 || v < mem) {
			mem = v
		}
	}
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 && (mem == 0 || uint64(l) < mem) {
		mem = uint64(l)
	}
	return mem
}

// newHeapGuard guards the live heap at max bytes: 0 is half of mem (no
// check when mem is unknown), negative no check.
func newHeapGuard(max int64, mem uint64, live func() uint64, warn func(bool, uint64, uint64)) *heapGuard {
	g := &heapGuard{live: live, warn: warn}
	switch {
	case max > 0:
		g.max = uint64(max)
	case max == 0:
		g.max = mem / 2
	}
	return g
}

// check returns an error wrapping api.ErrInsufficientStorage, naming peer
// who, while the live heap is over the guard's max, as read at most
// diskCheckEvery ago. It takes work again under seven eighths of max.
func (g *heapGuard) check(now time.Time, who string) error {
	if g == nil || g.max == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() || now.Sub(g.at) >= diskCheckEvery || now.Before(g.at) {
		g.at, g.seen = now, g.live()
		over := g.seen > g.max || g.over && g.seen > g.max-g.max/8
		if over != g.over {
			g.over = over
			if g.warn != nil {
				g.warn(over, g.seen, g.max)
			}
		}
	}
	if !g.over {
		return nil
	}
	return &noSpaceError{"memory", fmt.Sprintf("peer %s, the group's owner, holds %s of live heap, over its --max-heap of %s; "+
		"it takes no new work until finished groups go (--retention) and runs on the work it has",
		who, mib(g.seen), mib(g.max))}
}

// heapWarn logs the guard's changes of mind.
func (p *Peer) heapWarn(over bool, live, max uint64) {
	if over {
		p.log.Warn("live heap over --max-heap: refusing new work", "live_heap", mib(live), "max_heap", mib(max))
		return
	}
	p.log.Info("live heap under --max-heap again: taking new work", "live_heap", mib(live), "max_heap", mib(max))
}

// admit returns why this peer takes no new work now (it is short of disk
// space or of memory), nil when it does.
func (p *Peer) admit(now time.Time) error {
	if err := p.disk.check(now, p.ID()); err != nil {
		return err
	}
	return p.heap.check(now, p.ID())
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
