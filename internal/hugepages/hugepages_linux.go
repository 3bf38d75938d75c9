package hugepages

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	modePath = "/sys/kernel/mm/transparent_hugepage/enabled"
	mapsPath = "/proc/self/maps"
	// meminfoPath and overcommitPath are system files of /proc: a
	// systemd unit with ProcSubset=pid (or another /proc of only the
	// process's own files) hides both, /proc/self/maps not.
	meminfoPath    = "/proc/meminfo"
	overcommitPath = "/proc/sys/vm/overcommit_memory"
	// heapSpan bounds the address range taken for the heap: from the
	// start of the mapping that holds the first heap object up. The
	// runtime grows its heap upward from there, in arenas next to each
	// other; the mappings of anything else (thread stacks, files) lie far
	// above.
	heapSpan = 1 << 40
	// growth is how much more memory the runtime must hold before a
	// collection advises the heap's mappings again: its heap grows by
	// chunks of 4 MiB at least.
	growth = 4 << 20
)

var (
	once   sync.Once
	result Result
	// advisedHook, when set (tests), is called after every pass over the
	// mappings that a collection started.
	advisedHook atomic.Pointer[func(error)]
)

// Enable advises the heap for huge pages once per process (later calls
// return the first call's Result). It maps reserve bytes of heap ahead
// (0: DefaultReserve; negative: none), capped at a quarter of the
// machine's memory and skipped where the kernel does not overcommit
// (vm.overcommit_memory = 2, where address space is memory).
func Enable(reserve int64) Result {
	once.Do(func() { result = enable(reserve) })
	return result
}

func enable(reserve int64) Result {
	mode := parseMode(readFile(modePath))
	r := Result{Mode: mode}
	switch {
	case mode == "":
		r.Why = "the kernel offers no transparent huge pages"
	case mode == "never":
		r.Why = "transparent huge pages are off (never)"
	case mode == "always":
		r.Why = "the kernel backs all memory with huge pages it has (always)"
	case disabledByGODEBUG(os.Getenv("GODEBUG")):
		r.Why = "GODEBUG=disablethp=1"
	}
	if r.Why != "" {
		return r
	}
	probe := new([64]byte)
	lo, ok := mappingStart(readFile(mapsPath), uintptr(unsafe.Pointer(probe)))
	runtime.KeepAlive(probe)
	if !ok {
		r.Why = "the heap's mapping is not in " + mapsPath
		return r
	}
	a := &advisor{lo: lo, hi: lo + heapSpan}
	if reserve == 0 {
		reserve = DefaultReserve
	}
	if reserve > 0 {
		reserve, r.NoReserve = capReserve(reserve, readFile(meminfoPath), readFile(overcommitPath))
	}
	if reserve >= growth {
		mapAhead(reserve)
		r.Reserved = reserve
	}
	if err := a.advise(); err != nil {
		r.Why = err.Error()
		return r
	}
	if r.Reserved > 0 {
		// Collect the slice and give its pages back at once (they were
		// never touched), so that the runtime does not count them as
		// memory it holds.
		debug.FreeOSMemory()
	}
	a.last = heldBytes()
	a.arm()
	r.Advised = true
	return r
}

// mapAhead has the runtime map n bytes more of heap (rounded down to
// growth) and touches none of what it maps: freed, those pages are the
// first the runtime allocates from (lowest address first).
//
// Fresh memory from the system needs no zeroing, but the runtime clears a
// large object whole when any of its pages was in use before (freed by a
// collection, dirty), and the lowest free pages, where the reserve
// begins, are now and then such pages (the start's garbage, collected):
// taken as one slice, the reserve was then written through, 1 GiB of page
// faults and RSS, a start of 10-33 s on a loaded machine. Taken in slices of growth bytes, only the slices
// that land on dirty pages are cleared, and those pages are backed
// already. Collections are off meanwhile: the slices are all live, and a
// collection would only free more dirty pages under the ones to come.
func mapAhead(n int64) {
	gcPercent := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(gcPercent)
	ahead := make([][]byte, 0, n/growth)
	for range n / growth {
		ahead = append(ahead, make([]byte, growth))
	}
	runtime.KeepAlive(ahead)
}

// advisor advises the anonymous mappings in [lo, hi) for huge pages.
type advisor struct {
	lo, hi uintptr
	// last is the memory the runtime held at the last pass.
	last uint64
}

// arm runs a pass after the next collection when the runtime holds more
// memory than at the last one, then arms again.
func (a *advisor) arm() {
	runtime.AddCleanup(new([16]byte), func(struct{}) {
		if held := heldBytes(); held >= a.last+growth {
			err := a.advise()
			a.last = held
			if h := advisedHook.Load(); h != nil {
				(*h)(err)
			}
		}
		a.arm()
	}, struct{}{})
}

func (a *advisor) advise() error {
	maps, err := os.ReadFile(mapsPath)
	if err != nil {
		return err
	}
	for _, m := range anonMappings(maps, a.lo, a.hi) {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_HUGEPAGE); e != 0 {
			return os.NewSyscallError("madvise", e)
		}
	}
	return nil
}

// heldBytes is the memory the runtime has mapped, or 0 if it cannot tell.
func heldBytes() uint64 { return runtimeBytes("/memory/classes/total:bytes") }

func readFile(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// parseMode returns the bracketed word of the kernel's setting ("always
// [madvise] never" -> madvise), "" if there is none.
func parseMode(b []byte) string {
	s := string(b)
	i := strings.IndexByte(s, '[')
	j := strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// disabledByGODEBUG reports whether GODEBUG turns the runtime's use of huge
// pages off (the last setting of a name wins, as in the runtime).
func disabledByGODEBUG(godebug string) bool {
	off := false
	for kv := range strings.SplitSeq(godebug, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(kv), "disablethp="); ok {
			off = v == "1"
		}
	}
	return off
}

// capReserve caps the heap to map ahead, want bytes, at a quarter of the
// machine's memory (MemTotal of meminfo, /proc/meminfo) and takes none
// where the kernel does not overcommit (overcommit, the text of
// /proc/sys/vm/overcommit_memory, is "2": address space is memory, and
// the reserve would hold that much of the commit limit for good, or fail
// the start). Either file unreadable (nil) takes none too, and says why:
// the policy unknown, a reserve could be one the kernel refuses, and the
// memory unknown, no cap. Without the note a peer under ProcSubset=pid
// logged "0 MiB mapped ahead" and nothing else.
func capReserve(want int64, meminfo, overcommit []byte) (int64, string) {
	const hidden = " (a systemd ProcSubset=pid, or a /proc without the system's files)"
	total := memTotal(meminfo)
	switch policy := strings.TrimSpace(string(overcommit)); {
	case total <= 0:
		return 0, meminfoPath + " unreadable, the machine's memory unknown" + hidden
	case policy == "":
		return 0, overcommitPath + " unreadable, the overcommit policy unknown" + hidden
	case policy == "2":
		return 0, "vm.overcommit_memory = 2 (address space is memory)"
	}
	return min(want, total/4), ""
}

// memTotal is MemTotal of /proc/meminfo in bytes; 0 if absent.
func memTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// mapping is one line of /proc/self/maps: [start, end).
type mapping struct{ start, end uintptr }

// parseMaps calls each for every mapping of maps, with its permissions and
// whether it is anonymous (no inode); lines it cannot read are skipped.
func parseMaps(maps []byte, each func(m mapping, perms string, anon bool)) {
	for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
		f := strings.Fields(string(line))
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// An anonymous mapping has no inode and no path, or a name the
		// process gave it ("[anon:NAME]").
		anon := f[4] == "0" && (len(f) == 5 || strings.HasPrefix(f[5], "[anon:"))
		each(mapping{uintptr(start), uintptr(end)}, f[1], anon)
	}
}

// mappingStart returns the start of the mapping that holds p.
func mappingStart(maps []byte, p uintptr) (uintptr, bool) {
	var start uintptr
	found := false
	parseMaps(maps, func(m mapping, _ string, _ bool) {
		if !found && m.start <= p && p < m.end {
			start, found = m.start, true
		}
	})
	return start, found
}

// anonMappings returns the private, writable, anonymous mappings of maps
// within [lo, hi), cut to it.
func anonMappings(maps []byte, lo, hi uintptr) []mapping {
	var out []mapping
	parseMaps(maps, func(m mapping, perms string, anon bool) {
		if !anon || perms != "rw-p" {
			return
		}
		m.start, m.end = max(m.start, lo), min(m.end, hi)
		if m.start < m.end {
			out = append(out, m)
		}
	})
	return out
}
