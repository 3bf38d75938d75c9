package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestListFlagsDocumented holds docs/usage.md against `needle list --help`:
// the section on lists names every flag of needle list but the global
// ones (it lacked --worker-deaths, --label, --peer and more).
func TestListFlagsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "## Finding work: lists, search, counts\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	global := map[string]bool{}
	(&Globals{}).flagSet("").VisitAll(func(f *flag.Flag) { global[f.Name] = true })
	(&ListCommand{Globals: &Globals{}}).flags().VisitAll(func(f *flag.Flag) {
		if !global[f.Name] && !regexp.MustCompile(`(^|[^-\w])--`+f.Name+`([^-\w]|$)`).MatchString(sec) {
			t.Errorf("docs/usage.md's section on lists does not name needle list's flag `--%s`", f.Name)
		}
	})
}
