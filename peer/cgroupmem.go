package peer

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupUnlimited is the least limit taken as none: cgroup v1 writes
// "no limit" as the largest page-aligned int64 (9223372036854771712).
const cgroupUnlimited = 1 << 62

// cgroupMemoryLimit is the least memory limit of this process's cgroup and
// its ancestors, 0 when none is set or none can be read. self is
// /proc/self/cgroup, root the cgroup mount (/sys/fs/cgroup). The limit is
// looked up under the process's own path: a systemd unit's MemoryMax= is
// at /sys/fs/cgroup/system.slice/needled.service/memory.max, not at the
// root, which a container's cgroup namespace shows as its own. Under
// cgroup v1 the memory controller's hierarchy is read (memory.limit_in_bytes).
// A path the mount does not show (a v1 container without a cgroup
// namespace) falls back to its ancestors, the mount's root included.
func cgroupMemoryLimit(root string, self []byte) uint64 {
	var limit uint64
	take := func(file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
		if err == nil && v > 0 && v < cgroupUnlimited && (limit == 0 || v < limit) {
			limit = v
		}
	}
	walk := func(mount, p, file string) {
		for p = path.Clean("/" + p); ; p = path.Dir(p) {
			take(filepath.Join(mount, filepath.FromSlash(p), file))
			if p == "/" {
				return
			}
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2, the unified hierarchy
			walk(root, parts[2], "memory.max")
		case hasController(parts[1], "memory"): // v1
			walk(filepath.Join(root, "memory"), parts[2], "memory.limit_in_bytes")
		}
	}
	if limit == 0 { // no /proc/self/cgroup: the mount's root, as before
		take(filepath.Join(root, "memory.max"))
	}
	return limit
}

// hasController reports whether a v1 line's controller list names c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}
