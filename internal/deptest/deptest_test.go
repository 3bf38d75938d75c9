package deptest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const td = "github.com/needle-mesh/needle/internal/deptest/testdata/src/"

// wants reads the "// want: what" comments of the .go files in dir (test
// files excluded) as "file:line: what".
func wants(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			if _, what, ok := strings.Cut(sc.Text(), "// want: "); ok {
				out = append(out, fmt.Sprintf("%s:%d: %s", name, line, what))
			}
		}
		f.Close()
	}
	return out
}

func TestSourceFindsPlantedViolations(t *testing.T) {
	dir := filepath.Join("testdata", "src", "bad")
	vs, err := Source(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s:%d: %s", v.Pos.Filename, v.Pos.Line, v.What))
		if v.Chain != nil || v.Why == "" {
			t.Errorf("%v: a source violation has no chain and has a reason", v)
		}
	}
	want := wants(t, dir)
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 9 {
		t.Fatalf("testdata plants %d violations, want at least 9: %q", len(want), want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Source(%s):\n got %q\nwant %q", dir, got, want)
	}
}

func TestSourceCleanPackage(t *testing.T) {
	vs, err := Source(filepath.Join("testdata", "src", "clean"))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 {
		t.Errorf("clean package: %v", vs)
	}
}

func TestDepsChain(t *testing.T) {
	vs, err := Checker{BadDeps: PureDeps}.Violations("./testdata/src/chain")
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Violation{}
	for _, v := range vs {
		byPath[v.What] = v
		if len(v.Chain) < 2 || v.Chain[0] != td+"chain" || v.Chain[len(v.Chain)-1] != v.What {
			t.Errorf("%v: the chain does not run from the listed package to the forbidden one", v)
		}
	}
	want := td + "chain -> " + td + "web -> net/http: HTTP (network IO)"
	if got := byPath["net/http"].String(); got != want {
		t.Errorf("net/http: got %q, want %q", got, want)
	}
	if v, ok := byPath["net"]; !ok || v.Why != "network IO" || v.Chain[1] != td+"web" {
		t.Errorf("net: got %v (reported %v), want a chain through web", v, ok)
	}
	for _, v := range vs {
		if _, ok := match(PureDeps, v.What); !ok {
			t.Errorf("%v is not forbidden", v)
		}
	}
}

func TestDepsEachOnce(t *testing.T) {
	vs, err := Checker{BadDeps: PureDeps}.Violations("./testdata/src/web", "./testdata/src/chain")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range vs {
		if v.What == "net/http" {
			n++
			if want := []string{td + "chain", td + "web", "net/http"}; !slices.Equal(v.Chain, want) {
				t.Errorf("net/http chain %q, want the first listed package's %q", v.Chain, want)
			}
		}
	}
	if n != 1 {
		t.Errorf("net/http reported %d times, want once", n)
	}
}

func TestBadImportsDirectOnly(t *testing.T) {
	c := Checker{BadImports: map[string]string{"time": "no clock", "net": "no network"}}
	vs, err := c.Violations("./testdata/src/clean")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{td + "clean -> time: no clock"}
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestGOOS(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		vs, err := Checker{BadDeps: PureDeps, GOOS: goos}.Violations("./testdata/src/plat")
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(vs, func(v Violation) bool { return v.What == "os/exec" })
		if found != (goos == "windows") {
			t.Errorf("GOOS=%s: os/exec reported %v: %v", goos, found, vs)
		}
	}
}

func TestPureChecksBoth(t *testing.T) {
	c := Checker{BadDeps: PureDeps, Source: true}
	vs, err := c.Violations("./testdata/src/clean")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 {
		t.Errorf("clean package: %v", vs)
	}
	vs, err = c.Violations("./testdata/src/bad", "./testdata/src/web")
	if err != nil {
		t.Fatal(err)
	}
	var deps, src int
	for _, v := range vs {
		if v.Chain != nil {
			deps++
		} else {
			src++
		}
	}
	if want := len(wants(t, filepath.Join("testdata", "src", "bad"))); deps == 0 || src != want {
		t.Errorf("got %d dependency and %d source violations, want some and %d: %v", deps, src, want, vs)
	}
}

func TestListError(t *testing.T) {
	_, err := Checker{BadDeps: PureDeps}.Violations("./testdata/src/missing")
	if !errors.Is(err, ErrList) {
		t.Errorf("missing package: got %v, want %v", err, ErrList)
	}
	if _, err := (Checker{}).Violations(); !errors.Is(err, ErrList) {
		t.Errorf("no packages: got %v, want %v", err, ErrList)
	}
}

func TestMatch(t *testing.T) {
	rules := map[string]string{"net": "a", "net/http/...": "b", "github.com/x/...": "c", "github.com/x/y/...": "d"}
	for path, want := range map[string]string{
		"net": "a", "net/http": "b", "net/http/pprof": "b", "net/url": "", "net/httpx": "",
		"github.com/x": "c", "github.com/x/z": "c", "github.com/x/y/v4": "d", "github.com/xy": "",
	} {
		got, ok := match(rules, path)
		if got != want || ok != (want != "") {
			t.Errorf("match(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
}
