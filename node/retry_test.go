package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// TestRetryWaitsForEveryReplica: a leader proposes a retry only when every
// replica of the partition advertised it can apply one; an older replica
// (no Features in its heartbeats) makes the retry a 409 naming it.
func TestRetryWaitsForEveryReplica(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	c.oneServer(4)
	part, _ := c.ledBy("n1", 4)
	n := c.node("n1").n
	p := n.parts[part]
	if who := n.lacking(p, FeatureRetry); who != "" {
		t.Fatalf("lacking = %q in a mesh of this build", who)
	}
	n.mesh.members["n2"].features = 0 // as an older peer's heartbeats say
	if who := n.lacking(p, FeatureRetry); who != "n2" {
		t.Fatalf("lacking = %q; want n2", who)
	}
	g := groupIn(t, n, part)
	req := n.NextRequest()
	n.Retry(req, g, "", "op", "")
	rd := n.Ready()
	var got error
	for _, r := range rd.Replies {
		if r.Req == req {
			got = r.Err
		}
	}
	if !errors.Is(got, shard.ErrNotRetryable) || !strings.Contains(fmt.Sprint(got), "n2") {
		t.Fatalf("retry with an older replica: %v; want a conflict naming n2", got)
	}
}
