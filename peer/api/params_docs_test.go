package api

import (
	"os"
	"strings"
	"testing"
)

// TestListParamsDocumented holds the docs' lists of a list's filters
// against the parameters GET /v1/tasks and GET /v1/groups take: docs/usage.md's
// row of GET /v1/tasks and docs/api.md's section name each one (usage.md
// once lacked worker_deaths).
func TestListParamsDocumented(t *testing.T) {
	docs := map[string]string{}
	for _, f := range []string{"usage.md", "api.md"} {
		b, err := os.ReadFile("../../docs/" + f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	usageRow := lineWith(docs["usage.md"], "| `GET /v1/tasks` |")
	_, apiSec, _ := strings.Cut(docs["api.md"], "### GET /v1/tasks\n")
	apiSec, _, _ = strings.Cut(apiSec, "\n#")
	for _, name := range listParamNames {
		if !strings.Contains(usageRow, "`"+name+"`") {
			t.Errorf("docs/usage.md's row of GET /v1/tasks does not name the filter `%s`", name)
		}
		if !strings.Contains(apiSec, "`"+name+"`") {
			t.Errorf("docs/api.md's section GET /v1/tasks does not name the filter `%s`", name)
		}
	}
}

// lineWith returns the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}
