package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The Configuration table of docs/operations.md has a row for every flag
// needled defines: the operator's reference lacked --max-log, which the
// text above the table names (deploy audit s77, finding 3).
func TestOperationsConfigurationListsEveryFlag(t *testing.T) {
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?ms)^# Configuration\n.*?(^# |\z)`).FindString(string(raw))
	if section == "" {
		t.Fatal("docs/operations.md has no section # Configuration")
	}
	var firstCells strings.Builder
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.HasPrefix(line, "|") {
			firstCells.WriteString(cells[1] + "\n")
		}
	}
	fs := flag.NewFlagSet("needled", flag.ContinueOnError)
	(&Main{}).defineFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !regexp.MustCompile("`--" + regexp.QuoteMeta(f.Name) + "[ `]").MatchString(firstCells.String()) {
			t.Errorf("--%s has no row in docs/operations.md's Configuration table", f.Name)
		}
	})
}
