package peer

import (
	"os"
	"path/filepath"
	"testing"
)

// The memory limit is looked up under the process's own cgroup: a systemd
// unit's MemoryMax= (v2), a v1 hierarchy's limit_in_bytes, the least of
// its ancestors'; "max" and v1's "unlimited" are no limit.
func TestCgroupMemoryLimit(t *testing.T) {
	root := t.TempDir()
	put := func(rel, v string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("memory.max", "max")
	put("system.slice/memory.max", "max")
	put("system.slice/needled.service/memory.max", "2147483648")
	put("memory/memory.limit_in_bytes", "9223372036854771712")
	put("memory/docker/abc/memory.limit_in_bytes", "1073741824")
	put("memory/batch/memory.limit_in_bytes", "536870912")
	put("memory/batch/job/memory.limit_in_bytes", "9223372036854771712")
	for _, tt := range []struct {
		name, self string
		want       uint64
	}{
		{"v2 systemd unit", "0::/system.slice/needled.service\n", 2 << 30},
		{"v2 container namespace (its own root)", "0::/\n", 0},
		{"v2 path the mount does not show", "0::/kubepods/pod1/c1\n", 0},
		{"v1", "12:pids:/x\n4:memory:/docker/abc\n1:name=systemd:/x\n", 1 << 30},
		{"v1 ancestor's limit", "4:cpu,memory:/batch/job\n", 512 << 20},
		{"v1 unlimited", "4:memory:/\n", 0},
		{"garbage", "nonsense\n::\n", 0},
	} {
		if got := cgroupMemoryLimit(root, []byte(tt.self)); got != tt.want {
			t.Errorf("%s: limit = %d; want %d", tt.name, got, tt.want)
		}
	}
	put("memory.max", "4294967296") // a container's own cgroup at the mount's root
	if got := cgroupMemoryLimit(root, nil); got != 4<<30 {
		t.Errorf("no /proc/self/cgroup: limit = %d; want the root's %d", got, 4<<30)
	}
	if got := cgroupMemoryLimit(root, []byte("0::/kubepods/pod1/c1\n")); got != 4<<30 {
		t.Errorf("v2 path the mount does not show: limit = %d; want the root's", got)
	}
}
