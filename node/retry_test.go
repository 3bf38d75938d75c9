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
	if who, _ := n.lacking(p, FeatureRetry); who != "" {
		t.Fatalf("lacking = %q in a mesh of this build", who)
	}
	n.mesh.members["n2"].features = 0 // as an older peer's heartbeats say
	if who, unsure := n.lacking(p, FeatureRetry); who != "n2" || unsure {
		t.Fatalf("lacking = %q, unsure %v; want n2, heard", who, unsure)
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

	// A replica never heard from (a peer of a mesh started together that
	// is not up yet): its features are unknown, and the retry is
	// unavailable for now rather than refused.
	n.mesh.members["n2"].featured = false
	req = n.NextRequest()
	n.Retry(req, g, "", "op", "")
	rd = n.Ready()
	got = nil
	for _, r := range rd.Replies {
		if r.Req == req {
			got = r.Err
		}
	}
	if !errors.Is(got, ErrUnavailable) {
		t.Fatalf("retry with a replica never heard: %v; want ErrUnavailable", got)
	}
}

// MemberFeatures reports what a member last advertised: a peer that
// advertised FeatureSubmitSpec and then restarted as an older release
// lacks it, and a stranger has none.
func TestMemberFeatures(t *testing.T) {
	_, n, now := loneNode(t)
	hb := func(boot string, features uint64) Message {
		return Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: boot, Partitions: 16, Features: features,
			Members: []string{"m"}, Replicas: n.cfg.Replicas, Placement: n.cfg.Placement}}
	}
	if got := n.MemberFeatures("m"); got != 0 {
		t.Fatalf("MemberFeatures(stranger) = %#x; want 0", got)
	}
	now = now.Add(100 * time.Millisecond)
	n.Tick(now)
	if err := n.Step("m", hb("b1", Features)); err != nil {
		t.Fatalf("Step(m) = %v", err)
	}
	if got := n.MemberFeatures("m"); got&FeatureSubmitSpec == 0 || got != Features {
		t.Fatalf("MemberFeatures(m) = %#x; want %#x", got, uint64(Features))
	}
	now = now.Add(100 * time.Millisecond)
	n.Tick(now)
	if err := n.Step("m", hb("b2", Features&^FeatureSubmitSpec)); err != nil {
		t.Fatalf("Step(m restarted) = %v", err)
	}
	if got := n.MemberFeatures("m"); got&FeatureSubmitSpec != 0 {
		t.Fatalf("MemberFeatures(m restarted as an older release) = %#x; want no FeatureSubmitSpec", got)
	}
}
