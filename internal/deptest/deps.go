package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// ErrList is returned when go list cannot list the packages.
var ErrList = errors.New("deptest: go list")

// PureDeps are the dependencies a pure package may not link: anything that
// does network or process IO, disk storage, or exports metrics or traces.
var PureDeps = map[string]string{
	"net":                             "network IO",
	"net/http/...":                    "HTTP (network IO)",
	"os/exec":                         "starts processes",
	"os/signal":                       "process signals",
	"github.com/libp2p/...":           "libp2p networking",
	"github.com/dgraph-io/badger/...": "disk storage (Badger)",
	"github.com/prometheus/...":       "metrics export (Prometheus)",
	"go.opentelemetry.io/...":         "trace export (OpenTelemetry)",
}

// Checker states the rules for some packages.
type Checker struct {
	// BadDeps maps a forbidden import path (or "path/..." for it and every
	// package below it) to the reason, for every transitive dependency.
	BadDeps map[string]string
	// BadImports is like BadDeps for the listed packages' direct imports
	// only.
	BadImports map[string]string
	// GOOS and GOARCH, if set, list the packages for that platform.
	GOOS, GOARCH string
	// Source also runs the source check (see Source) on each listed
	// package's directory.
	Source bool
}

// Violation is one broken rule.
type Violation struct {
	// Chain is the import chain from a listed package to the forbidden
	// one, for a dependency violation; nil for a source violation.
	Chain []string
	// Pos is where a source violation is; zero for a dependency.
	Pos token.Position
	// What is the forbidden import path, or the forbidden use
	// ("go statement", "time.Now", "rand.IntN", "dot import of time").
	What string
	// Why is the rule's reason.
	Why string
}

// String is "a -> b -> c: why" for a dependency and "file:line: what:
// why" for a source violation.
func (v Violation) String() string {
	if v.Chain != nil {
		return strings.Join(v.Chain, " -> ") + ": " + v.Why
	}
	return fmt.Sprintf("%s:%d: %s: %s", v.Pos.Filename, v.Pos.Line, v.What, v.Why)
}

// Pure fails t for every violation of the purity rules (PureDeps and the
// source check) by pkgs, go list patterns relative to the test's directory.
func Pure(t testing.TB, pkgs ...string) {
	t.Helper()
	Checker{BadDeps: PureDeps, Source: true}.Check(t, pkgs...)
}

// Check fails t with every violation of c's rules by pkgs.
func (c Checker) Check(t testing.TB, pkgs ...string) {
	t.Helper()
	vs, err := c.Violations(pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// listed is the part of go list's package we read.
type listed struct {
	ImportPath string
	Dir        string
	DepOnly    bool
	Imports    []string
}

// Violations returns every violation of c's rules by pkgs: the dependency
// violations first, sorted by forbidden path, each forbidden path once
// (with its shortest chain from the first listed package that reaches
// it); then the source violations by file and line.
func (c Checker) Violations(pkgs ...string) ([]Violation, error) {
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%w: no packages given", ErrList)
	}
	all, roots, err := c.list(pkgs)
	if err != nil {
		return nil, err
	}
	var out []Violation
	seen := map[string]bool{}
	for _, root := range roots {
		for _, imp := range all[root].Imports {
			if why, ok := match(c.BadImports, imp); ok {
				out = append(out, Violation{Chain: []string{root, imp}, What: imp, Why: why})
			}
		}
		for _, v := range badDeps(all, root, c.BadDeps) {
			if !seen[v.What] {
				seen[v.What] = true
				out = append(out, v)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return strings.Compare(a.What, b.What) })
	if c.Source {
		for _, root := range roots {
			vs, err := Source(all[root].Dir)
			if err != nil {
				return nil, err
			}
			out = append(out, vs...)
		}
	}
	return out, nil
}

// list runs go list -deps -json on pkgs and returns every package by
// import path and the listed ones' paths, sorted.
func (c Checker) list(pkgs []string) (map[string]*listed, []string, error) {
	args := append([]string{"list", "-deps", "-json=ImportPath,Dir,DepOnly,Imports", "--"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Env = os.Environ()
	if c.GOOS != "" {
		cmd.Env = append(cmd.Env, "GOOS="+c.GOOS)
	}
	if c.GOARCH != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+c.GOARCH)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%w %s: %w: %s", ErrList, strings.Join(pkgs, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	all := map[string]*listed{}
	var roots []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("%w: decoding its output: %w", ErrList, err)
		}
		all[p.ImportPath] = p
		if !p.DepOnly {
			roots = append(roots, p.ImportPath)
		}
	}
	slices.Sort(roots)
	return all, roots, nil
}

// badDeps walks the import graph breadth first from root and returns a
// violation, with the shortest chain, for every package rules forbid
// (root included).
func badDeps(all map[string]*listed, root string, rules map[string]string) []Violation {
	parent := map[string]string{root: ""}
	queue := []string{root}
	var out []Violation
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if why, ok := match(rules, p); ok {
			out = append(out, Violation{Chain: chain(parent, p), What: p, Why: why})
		}
		if all[p] == nil {
			continue
		}
		for _, imp := range all[p].Imports {
			if _, ok := parent[imp]; !ok {
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return out
}

// chain is the path from the walk's root to p.
func chain(parent map[string]string, p string) []string {
	var c []string
	for ; p != ""; p = parent[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}

// match reports whether rules forbid path, and why: by the longest key
// equal to path or, for a key "k/...", equal to k or a prefix of path
// ending in "/".
func match(rules map[string]string, path string) (string, bool) {
	best, why := -1, ""
	for key, reason := range rules {
		ok := key == path
		if k, wild := strings.CutSuffix(key, "/..."); wild {
			ok = path == k || strings.HasPrefix(path, k+"/")
		}
		if ok && len(key) > best {
			best, why = len(key), reason
		}
	}
	return why, best >= 0
}
