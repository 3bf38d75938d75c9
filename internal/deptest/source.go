package deptest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// clockFuncs are the time functions that read or wait on the wall clock.
var clockFuncs = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "Tick": true, "NewTimer": true,
	"NewTicker": true, "AfterFunc": true, "Since": true, "Until": true,
}

// randAllowed are math/rand's and math/rand/v2's names that do not touch
// the global generator: constructors and types. Anything else does.
var randAllowed = map[string]bool{
	"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
	"Rand": true, "Source": true, "Source64": true, "PCG": true, "ChaCha8": true, "Zipf": true,
}

// watched are the imports the source check looks at, by path, with their
// default local names.
var watched = map[string]string{"time": "time", "math/rand": "rand", "math/rand/v2": "rand"}

const (
	whyGo    = "starts a goroutine (a pure package is driven by its caller)"
	whyClock = "reads the wall clock (time is an input)"
	whyRand  = "uses the global random generator (randomness is an input)"
)

// Source parses the non-test .go files in dir and returns a violation for
// every go statement, wall-clock use and global-rand use, by file and
// line. File names are relative to the current directory when under it.
func Source(dir string) ([]Violation, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("deptest: %w", err)
	}
	fset := token.NewFileSet()
	var out []Violation
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, shortPath(filepath.Join(dir, name)), nil, 0)
		if err != nil {
			return nil, fmt.Errorf("deptest: %w", err)
		}
		out = append(out, checkFile(fset, f)...)
	}
	slices.SortStableFunc(out, func(a, b Violation) int {
		if c := strings.Compare(a.Pos.Filename, b.Pos.Filename); c != 0 {
			return c
		}
		return a.Pos.Line - b.Pos.Line
	})
	return out, nil
}

// checkFile returns the violations in one parsed file.
func checkFile(fset *token.FileSet, f *ast.File) []Violation {
	var out []Violation
	add := func(pos token.Pos, what, why string) {
		out = append(out, Violation{Pos: fset.Position(pos), What: what, Why: why})
	}
	names := map[string]string{} // local name -> watched import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name, ok := watched[path]
		if !ok {
			continue
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch name {
		case "_":
		case ".":
			why := whyClock
			if path != "time" {
				why = whyRand
			}
			add(imp.Pos(), "dot import of "+path, why)
		default:
			names[name] = path
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			add(n.Pos(), "go statement", whyGo)
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			// A package name is left unresolved by the parser; a
			// variable of the same name in scope has an object.
			if !ok || id.Obj != nil {
				return true
			}
			path, ok := names[id.Name]
			switch {
			case !ok:
			case path == "time" && clockFuncs[n.Sel.Name]:
				add(n.Pos(), id.Name+"."+n.Sel.Name, whyClock)
			case path != "time" && !randAllowed[n.Sel.Name]:
				add(n.Pos(), id.Name+"."+n.Sel.Name, whyRand)
			}
		}
		return true
	})
	return out
}

// shortPath is p relative to the current directory if p is under it.
func shortPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return rel
}
