package bench

import (
	"fmt"
	"testing"
)

func failedTasks(from, n int) []Task {
	ts := make([]Task, n)
	for i := range ts {
		ts[i] = Task{ID: fmt.Sprintf("g.%d", from+i), State: "FAILED"}
	}
	return ts
}

func TestCheckPages(t *testing.T) {
	good1 := listPage{Tasks: failedTasks(0, wlPage), Cursor: "c1"}
	good2 := listPage{Tasks: failedTasks(wlPage, wlPage)}
	short := listPage{Tasks: failedTasks(wlPage, wlPage-1)}
	dup := listPage{Tasks: failedTasks(wlPage-1, wlPage)}
	wrong := listPage{Tasks: failedTasks(wlPage, wlPage)}
	wrong.Tasks[3].State = "SUCCEEDED"
	missing := listPage{Tasks: failedTasks(wlPage, wlPage), Missing: []int{7}}
	for _, tt := range []struct {
		name     string
		p1, p2   listPage
		problems int
	}{
		{"good", good1, good2, 0},
		{"short page", good1, short, 1},
		{"task twice", good1, dup, 1},
		{"not FAILED", good1, wrong, 1},
		{"missing partition", good1, missing, 1},
		{"no cursor", listPage{Tasks: good1.Tasks}, good2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ck checks
			checkPages(&ck, tt.p1, tt.p2)
			if ck.count != tt.problems {
				t.Errorf("checkPages: %d problems %v; want %d", ck.count, ck.list, tt.problems)
			}
		})
	}
}
