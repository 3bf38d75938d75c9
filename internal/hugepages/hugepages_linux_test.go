package hugepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never\n": "always",
		"always madvise [never]\n": "never",
		"":                         "",
		"always madvise never":     "",
		"] [":                      "",
	} {
		if got := parseMode([]byte(in)); got != want {
			t.Errorf("parseMode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDisabledByGODEBUG(t *testing.T) {
	for in, want := range map[string]bool{
		"":                          false,
		"disablethp=1":              true,
		"disablethp=0":              false,
		"gctrace=1, disablethp=1":   true,
		"disablethp=1,disablethp=0": false,
		"xdisablethp=1":             false,
	} {
		if got := disabledByGODEBUG(in); got != want {
			t.Errorf("disabledByGODEBUG(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestMemTotal(t *testing.T) {
	if got := memTotal([]byte("MemTotal:       24684044 kB\nMemFree: 1 kB\n")); got != 24684044<<10 {
		t.Errorf("memTotal = %d", got)
	}
	if got := memTotal([]byte("MemFree: 1 kB\n")); got != 0 {
		t.Errorf("memTotal without the line = %d", got)
	}
}

// Under systemd's ProcSubset=pid /proc holds only the process's own
// files: /proc/meminfo and /proc/sys/vm/overcommit_memory read as
// missing. The reserve then is none, as before, but said so, instead of
// a silent "0 MiB mapped ahead"; and the overcommit policy hidden takes
// none too (a reserve on a strict host would hold the commit limit).
func TestCapReserve(t *testing.T) {
	dir := t.TempDir()
	missing := readFile(filepath.Join(dir, "meminfo")) // what ProcSubset=pid leaves
	meminfo := []byte("MemTotal:       2097152 kB\n")  // 2 GiB
	for _, tc := range []struct {
		name                string
		meminfo, overcommit []byte
		want                int64
		why                 string // a word of the note; "" = no note
	}{
		{"both read", meminfo, []byte("0\n"), DefaultReserve / 2, ""},
		{"always overcommit", []byte("MemTotal: 16777216 kB\n"), []byte("1\n"), DefaultReserve, ""},
		{"strict overcommit", meminfo, []byte("2\n"), 0, "overcommit_memory = 2"},
		{"ProcSubset=pid", missing, missing, 0, meminfoPath},
		{"meminfo hidden", missing, []byte("0\n"), 0, meminfoPath},
		{"overcommit hidden", meminfo, missing, 0, overcommitPath},
	} {
		got, why := capReserve(DefaultReserve, tc.meminfo, tc.overcommit)
		if got != tc.want || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s: capReserve = %d, %q; want %d and a note naming %q", tc.name, got, why, tc.want, tc.why)
		}
	}
	r := Result{Mode: "madvise", Advised: true, NoReserve: "x unreadable"}
	if s := r.String(); !strings.Contains(s, "none mapped ahead: x unreadable") {
		t.Errorf("Result.String() = %q; want the note", s)
	}
}

const sampleMaps = `00400000-0268d000 r-xp 00000000 fe:00 123 /usr/bin/needled
0268d000-046db000 rw-p 00000000 00:00 0 
37144000000-37144400000 ---p 00000000 00:00 0 
37144400000-3714f800000 rw-p 00000000 00:00 0 
3714f800000-37154000000 ---p 00000000 00:00 0 
37160000000-37164000000 rw-p 00000000 00:00 0                          [anon: Go: heap]
37170000000-37171000000 rw-s 00000000 fe:00 10018891                   /data/00001.mem
38000000000-38000400000 rw-p 00000000 00:00 0 
garbage line
7f1a90000000-7f1a90021000 rw-p 00000000 00:00 0 
`

func TestAnonMappings(t *testing.T) {
	lo := uintptr(0x37144000000)
	got := anonMappings([]byte(sampleMaps), lo, lo+0x1000000000)
	want := []mapping{
		{0x37144400000, 0x3714f800000},
		{0x37160000000, 0x37164000000},
		{0x38000000000, 0x38000400000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anonMappings = %x, want %x", got, want)
	}
	// Cut to the window.
	got = anonMappings([]byte(sampleMaps), 0x37148000000, 0x37150000000)
	if want := []mapping{{0x37148000000, 0x3714f800000}}; !reflect.DeepEqual(got, want) {
		t.Errorf("anonMappings cut = %x, want %x", got, want)
	}
}

func TestMappingStart(t *testing.T) {
	if s, ok := mappingStart([]byte(sampleMaps), 0x37150000000); !ok || s != 0x3714f800000 {
		t.Errorf("mappingStart = %x %v", s, ok)
	}
	if _, ok := mappingStart([]byte(sampleMaps), 0x10); ok {
		t.Error("mappingStart found an address no mapping holds")
	}
}

// vmaFlags returns the VmFlags of the mapping of /proc/self/smaps holding p.
func vmaFlags(t *testing.T, p uintptr) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	in := false
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			s, _ := strconv.ParseUint(lo, 16, 64)
			e, _ := strconv.ParseUint(hi, 16, 64)
			in = uintptr(s) <= p && p < uintptr(e)
			continue
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.Fields(v)
		}
	}
	t.Fatalf("no mapping holds %#x", p)
	return nil
}

func hasFlag(flags []string, f string) bool {
	for _, x := range flags {
		if x == f {
			return true
		}
	}
	return false
}

// TestEnableAdvisesHeap: on a kernel that gives huge pages on request, the
// heap's mapping is advised (VmFlags hg) at once, and so is heap mapped
// after Enable, after a collection.
func TestEnableAdvisesHeap(t *testing.T) {
	if m := parseMode(readFile(modePath)); m != "madvise" {
		t.Skipf("transparent huge pages are %q here, not madvise", m)
	}
	if disabledByGODEBUG(os.Getenv("GODEBUG")) {
		t.Skip("GODEBUG=disablethp=1")
	}
	passes := watchPasses(t)

	r := Enable(64 << 20)
	if !r.Advised || r.Reserved != 64<<20 {
		t.Fatalf("Enable = %+v", r)
	}
	if again := Enable(0); again != r {
		t.Errorf("a second Enable = %+v, want the first's %+v", again, r)
	}
	small := new([64]byte)
	if f := vmaFlags(t, uintptr(unsafe.Pointer(small))); !hasFlag(f, "hg") {
		t.Errorf("the heap's mapping has flags %v, no hg", f)
	}
	runtime.KeepAlive(small)

	// More than the reserve: the runtime maps more heap.
	big := make([]byte, 256<<20)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	collectUntilAdvised(t, p, passes)
	runtime.KeepAlive(big)
}

// TestAdvisorAfterCollection: a mapping the advisor's range takes in that
// appeared after it started is advised after a collection.
func TestAdvisorAfterCollection(t *testing.T) {
	if m := parseMode(readFile(modePath)); m != "madvise" {
		t.Skipf("transparent huge pages are %q here, not madvise", m)
	}
	mem, err := unix.Mmap(-1, 0, 8<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	if f := vmaFlags(t, p); hasFlag(f, "hg") {
		t.Fatalf("a fresh mapping has flags %v already", f)
	}
	passes := watchPasses(t)
	a := &advisor{lo: p, hi: p + uintptr(len(mem))}
	a.arm()
	collectUntilAdvised(t, p, passes)
}

// watchPasses returns the results of the passes collections start from now
// on, until the test ends.
func watchPasses(t *testing.T) <-chan error {
	passes := make(chan error, 16)
	hook := func(err error) {
		select {
		case passes <- err:
		default:
		}
	}
	advisedHook.Store(&hook)
	t.Cleanup(func() { advisedHook.Store(nil) })
	return passes
}

// collectUntilAdvised collects until the mapping holding p is advised (a
// minute at most: a failure), and fails on a pass that did not advise.
func collectUntilAdvised(t *testing.T, p uintptr, passes <-chan error) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !hasFlag(vmaFlags(t, p), "hg") {
		runtime.GC()
		select {
		case err := <-passes:
			if err != nil {
				t.Fatalf("a pass after a collection: %v", err)
			}
		case <-deadline:
			t.Fatalf("%#x not advised after collections; flags %v", p, vmaFlags(t, p))
		}
	}
}

// TestEnableTouchesNoReserve: mapping the reserve ahead touches none of
// it, even where the heap already holds dirty free pages (memory a
// collection freed) where the reserve begins. The runtime clears a large
// object whole when any of its pages was used before, so a reserve taken
// as one slice there was written through, 1 GiB of page faults: a needled
// start on a loaded machine took 10-33 s before its first log line, now
// and then (three daemons starting at once beside three busy loops).
// Measured in a child process, the heap not yet advised by another test.
func TestEnableTouchesNoReserve(t *testing.T) {
	if m := parseMode(readFile(modePath)); m != "madvise" {
		t.Skipf("transparent huge pages are %q here, not madvise", m)
	}
	if disabledByGODEBUG(os.Getenv("GODEBUG")) {
		t.Skip("GODEBUG=disablethp=1")
	}
	const reserve = 256 << 20
	if os.Getenv("HUGEPAGES_TEST_CHILD") == "1" {
		// Dirty free pages at the top of the heap, where the reserve
		// begins: touched with collections off (none puts a span of its
		// own behind them), then freed.
		runtime.GC()
		gcPercent := debug.SetGCPercent(-1)
		touch(16 << 20)
		debug.SetGCPercent(gcPercent)
		runtime.GC()
		var before, after unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &before)
		r := enable(reserve)
		_ = unix.Getrusage(unix.RUSAGE_SELF, &after)
		fmt.Printf("reserved=%d faults=%d\n", r.Reserved, after.Minflt-before.Minflt)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnableTouchesNoReserve$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HUGEPAGES_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var reserved, faults int64
	i := bytes.Index(out, []byte("reserved="))
	if i < 0 {
		t.Fatalf("child printed %q; want reserved=... faults=...", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "reserved=%d faults=%d", &reserved, &faults); err != nil {
		t.Fatalf("child printed %q: %v", out, err)
	}
	// Every 4 KiB page of the reserve written is 65,536 faults (61,500
	// past the dirty pages, which are backed); untouched, about 120.
	if reserved != reserve || faults > reserve/4096/4 {
		t.Fatalf("enable(%d) reserved %d with %d minor faults; want the reserve and at most %d (untouched)",
			reserve, reserved, faults, reserve/4096/4)
	}
	t.Logf("enable(%d): %d minor faults", reserve, faults)
}
