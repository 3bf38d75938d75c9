package simulate

import "testing"

// The periodic check's turns cover every node, one turn after another,
// each node once per ceil(nodes/k) turns; k nodes or fewer are all
// checked every turn.
func TestCheckTurnCoversEveryNode(t *testing.T) {
	for _, c := range []struct{ nodes, k int }{{5, 64}, {64, 64}, {65, 64}, {200, 64}, {1000, 64}, {7, 3}} {
		turns := (c.nodes + c.k - 1) / c.k
		seen := make([]int, c.nodes)
		next := 0
		for range turns {
			from, n, after := checkTurn(next, c.nodes, c.k)
			if n > c.k && c.nodes > c.k || n > c.nodes {
				t.Fatalf("%d nodes, k %d: a turn of %d", c.nodes, c.k, n)
			}
			for i := range n {
				seen[(from+i)%c.nodes]++
			}
			next = after
		}
		for i, v := range seen {
			if v == 0 {
				t.Fatalf("%d nodes, k %d: node %d not checked in %d turns", c.nodes, c.k, i, turns)
			}
		}
	}
}
