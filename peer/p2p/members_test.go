package p2p

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/needle-mesh/needle/internal/syncbuf"
)

// identity makes a data dir holding a new identity key and returns it
// with its peer id, so that a members file can name a host before it
// starts.
func identity(tb testing.TB) (dir, id string) {
	tb.Helper()
	dir = tb.TempDir()
	id, _, err := InitIdentity(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return dir, id
}

// writeMembers writes a members file listing ids (each named after its
// position) at path, replacing what it held.
func writeMembers(tb testing.TB, path string, ids ...string) {
	tb.Helper()
	var b strings.Builder
	b.WriteString("# test mesh\n\n")
	for i, id := range ids {
		b.WriteString(id + "  host-" + string(rune('a'+i)) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// waitGone waits until h holds no connection to peer id.
func waitGone(tb testing.TB, h *Host, id string) {
	tb.Helper()
	timeout := time.After(testTimeout)
	for {
		changed := h.connChanged()
		if !slices.Contains(h.Connected(), id) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			tb.Fatalf("%s still connected to %s", h.ID(), id)
		}
	}
}

// knock dials to's TCP address from from and waits until from holds no
// connection to to. A dial refused by to's gate may still succeed on
// from's side: Noise's initiator finishes its handshake (and, with the
// muxer negotiated inside it, its upgrade) before the responder checks
// its id and closes the connection. So the check is that no connection
// stays, and the error, if any, is returned.
func knock(tb testing.TB, from, to *Host) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), testTimeout)
	defer cancel()
	err := connectUnpaused(ctx, tb, from, to)
	waitGone(tb, from, to.ID())
	return err
}

// connectUnpaused dials to from from, forgetting from's pause of its dials
// to to first, and again when the dial found one: the close of an earlier
// connection (a reload's) may note its pause after the test saw it gone.
func connectUnpaused(ctx context.Context, tb testing.TB, from, to *Host) error {
	tb.Helper()
	for {
		unpause(tb, from, to)
		err := from.Connect(ctx, addrOf(tb, to, "tcp"))
		if !errors.Is(err, ErrDialPaused) || ctx.Err() != nil {
			return err
		}
	}
}

// unpause forgets from's pause of its dials to to (dialPause), which the
// refusal of its last dial set: the tests that count refusals dial at
// once on purpose. TestMembersRefusedByListedPeerLogged tests the pause.
func unpause(tb testing.TB, from, to *Host) {
	tb.Helper()
	id, err := peer.Decode(to.ID())
	if err != nil {
		tb.Fatal(err)
	}
	from.unpauseDial(id)
}

// dialFails dials to from from and fails the test unless the dial fails:
// from's own gate refuses it.
func dialFails(tb testing.TB, from, to *Host, what string) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), testTimeout)
	defer cancel()
	err := from.Connect(ctx, addrOf(tb, to, "tcp"))
	if err == nil {
		tb.Fatalf("%s: Connect succeeded; want it refused", what)
	}
	return err
}

func TestParseMembers(t *testing.T) {
	_, a := identity(t)
	_, b := identity(t)
	got, err := ParseMembers("m.txt", "# the mesh\n\n"+a+"\n  "+b+"\t web-3  east \r\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{a: "", b: "web-3  east"}
	if len(got) != len(want) {
		t.Fatalf("ParseMembers = %v; want %v", got, want)
	}
	for id, name := range got {
		if want[id.String()] != name {
			t.Errorf("peer %s named %q; want %q", id, name, want[id.String()])
		}
	}
	for text, msg := range map[string]string{
		"# only a comment\n\n":                  "m.txt: lists no peer id",
		"":                                      "m.txt: lists no peer id",
		a + "\n\n12D3KooWnotanid web\n":         "m.txt: line 3: \"12D3KooWnotanid\" is not a peer id",
		"# x\n" + a + " one\n" + b + "\n" + a:   "m.txt: line 4: peer " + a + " is on line 2 too",
		"web-3 " + a + "\n":                     "m.txt: line 1: \"web-3\" is not a peer id",
		a + "\n/ip4/10.0.0.1/tcp/4001/p2p/" + b: "m.txt: line 2:",
	} {
		_, err := ParseMembers("m.txt", text)
		if !errors.Is(err, ErrMembers) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseMembers(%q) = %v; want ErrMembers holding %q", text, err, msg)
		}
	}
	if _, err := LoadMembers(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("LoadMembers(missing file) = %v; want an error naming it", err)
	}
}

// A listed peer connects; an unlisted one can neither dial in nor be
// dialed, and both refusals are counted.
func TestMembersRefuseUnlisted(t *testing.T) {
	dirA, idA := identity(t)
	dirB, idB := identity(t)
	list := filepath.Join(t.TempDir(), "members")
	writeMembers(t, list, idA, idB)
	a := mustHost(t, Config{DataDir: dirA, MembersFile: list})
	b := mustHost(t, Config{DataDir: dirB, MembersFile: list, Join: []string{addrOf(t, a, "tcp")}})
	waitConnected(t, b, a.ID())
	waitConnected(t, a, b.ID())
	if !a.Allowed(idB) || !a.Allowed(idA) {
		t.Fatal("a listed peer is not Allowed")
	}

	outsider := mustHost(t, Config{}) // no list of its own: only a's gate stands
	if a.Allowed(outsider.ID()) {
		t.Fatal("an unlisted peer is Allowed")
	}
	knock(t, outsider, a)
	if st := a.Stats(); st.RefusedInbound == 0 {
		t.Errorf("RefusedInbound = 0 after an unlisted peer's dial; stats %+v", st)
	}
	err := dialFails(t, a, outsider, "dialing an unlisted peer")
	if !strings.Contains(err.Error(), "gater disallows") {
		t.Errorf("dial of an unlisted peer failed with %v; want the gater's refusal", err)
	}
	if st := a.Stats(); st.RefusedOutbound == 0 {
		t.Errorf("RefusedOutbound = 0 after dialing an unlisted peer; stats %+v", st)
	}
	// A frame to it is dropped, not sent over some other path.
	if err := a.Send(outsider.ID(), []byte("secret")); err != nil {
		t.Fatalf("Send = %v; want it queued (and dropped by the writer)", err)
	}
	if slices.Contains(a.Connected(), outsider.ID()) || slices.Contains(outsider.Connected(), a.ID()) {
		t.Fatalf("a and the unlisted peer are connected: a %v, outsider %v", a.Connected(), outsider.Connected())
	}
	if err := b.Send(a.ID(), []byte("member")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); f.From != b.ID() || string(f.Data) != "member" {
		t.Fatalf("got %q from %s; want member from %s", f.Data, f.From, b.ID())
	}
}

// A peer removed from the file is disconnected at the reload and cannot
// connect again; a file that does not
// parse keeps the list; listing the peer again lets it back.
func TestMembersReload(t *testing.T) {
	dirA, idA := identity(t)
	dirB, idB := identity(t)
	listA := filepath.Join(t.TempDir(), "members-a")
	listB := filepath.Join(t.TempDir(), "members-b")
	writeMembers(t, listA, idA, idB)
	writeMembers(t, listB, idA, idB)
	a := mustHost(t, Config{DataDir: dirA, MembersFile: listA})
	// b dials by hand, without a join loop, so that every dial below is
	// the test's own and a's counters can be checked after each.
	b := mustHost(t, Config{DataDir: dirB, MembersFile: listB})
	connect := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		return connectUnpaused(ctx, t, b, a)
	}
	if err := connect(); err != nil {
		t.Fatal(err)
	}
	waitConnected(t, a, b.ID())
	waitConnected(t, b, a.ID())

	writeMembers(t, listA, idA)
	listed, disconnected, err := a.ReloadMembers()
	if err != nil || listed != 1 || disconnected != 1 {
		t.Fatalf("ReloadMembers = %d listed, %d disconnected, %v; want 1, 1, nil", listed, disconnected, err)
	}
	waitGone(t, a, b.ID())
	waitGone(t, b, a.ID())
	refused := a.Stats().RefusedInbound
	kerr := knock(t, b, a)
	if got := a.Stats().RefusedInbound; got <= refused {
		t.Errorf("RefusedInbound %d -> %d across a removed peer's dial (%v); want it counted", refused, got, kerr)
	}
	dialFails(t, a, b, "dialing a removed peer")

	// A half-written file: the list stays (b refused), and the error
	// names the line.
	if err := os.WriteFile(listA, []byte(idA+"\n"+idB[:20]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.ReloadMembers(); !errors.Is(err, ErrMembers) || !strings.Contains(err.Error(), listA+": line 2:") {
		t.Fatalf("ReloadMembers(bad line 2) = %v; want ErrMembers naming %s: line 2", err, listA)
	}
	if a.Allowed(idB) || !a.Allowed(idA) {
		t.Fatal("a bad file changed the list")
	}
	if err := os.WriteFile(listA, []byte("# emptied\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.ReloadMembers(); !errors.Is(err, ErrMembers) {
		t.Fatalf("ReloadMembers(no id) = %v; want ErrMembers", err)
	}
	knock(t, b, a)

	writeMembers(t, listA, idA, idB)
	if _, disconnected, err := a.ReloadMembers(); err != nil || disconnected != 0 {
		t.Fatalf("ReloadMembers = %d disconnected, %v; want 0, nil", disconnected, err)
	}
	if err := connect(); err != nil {
		t.Fatalf("listed again, b cannot connect: %v", err)
	}
	waitConnected(t, a, b.ID())

	c := mustHost(t, Config{})
	if _, _, err := c.ReloadMembers(); !errors.Is(err, ErrNoMembers) {
		t.Errorf("ReloadMembers without a file = %v; want ErrNoMembers", err)
	}
}

// Gossip authored by a peer that is not listed is dropped even when a
// listed peer relays it: c (unlisted on a) gossips through b (which lists
// it); a counts the messages it refused and delivers none of c's.
func TestMembersGossipRelay(t *testing.T) {
	dirA, idA := identity(t)
	dirB, idB := identity(t)
	dirC, idC := identity(t)
	dir := t.TempDir()
	listA, listB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeMembers(t, listA, idA, idB)
	writeMembers(t, listB, idA, idB, idC)
	a := mustHost(t, Config{DataDir: dirA, MembersFile: listA})
	b := mustHost(t, Config{DataDir: dirB, MembersFile: listB, Join: []string{addrOf(t, a, "tcp")}})
	c := mustHost(t, Config{DataDir: dirC, Join: []string{addrOf(t, b, "tcp")}})
	waitConnected(t, b, a.ID())
	waitConnected(t, c, b.ID())
	gossipBothWays(t, a, b, 0)
	gossipBothWays(t, b, c, 0)

	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for a.Stats().GossipRefused == 0 {
		if err := c.Publish([]byte("from c")); err != nil {
			t.Fatal(err)
		}
		select {
		case f := <-a.Gossip():
			if f.From == idC {
				t.Fatalf("a delivered gossip authored by unlisted %s (relayed by b)", idC)
			}
		case <-b.Gossip(): // b takes c's gossip: it lists c
		case <-tick.C:
		case <-deadline:
			t.Fatalf("a refused no gossip within %v: c's messages never reached it through b; stats %+v", testTimeout, a.Stats())
		}
	}
	if slices.Contains(a.Connected(), idC) {
		t.Fatal("a is connected to the unlisted peer")
	}
}

// The validator decides by the signed author, not by the neighbour that
// relayed the message.
func TestMembersValidate(t *testing.T) {
	_, idA := identity(t)
	_, idB := identity(t)
	_, idC := identity(t)
	pa, pb2, pc := peer.ID(mustDecode(t, idA)), mustDecode(t, idB), mustDecode(t, idC)
	g := testGate(t, pa, pb2)
	msg := func(from peer.ID) *pubsub.Message {
		return &pubsub.Message{Message: &pb.Message{From: []byte(from)}}
	}
	ctx := t.Context()
	for _, tc := range []struct {
		relay, from peer.ID
		want        pubsub.ValidationResult
	}{
		{pb2, pb2, pubsub.ValidationAccept},
		{pb2, pa, pubsub.ValidationAccept}, // its own, relayed back
		{pb2, pc, pubsub.ValidationIgnore}, // a listed relay, an unlisted author
		{pc, pb2, pubsub.ValidationAccept}, // the relay is the gater's to check
	} {
		if got := g.validate(ctx, tc.relay, msg(tc.from)); got != tc.want {
			t.Errorf("validate(relay %s, from %s) = %v; want %v", tc.relay, tc.from, got, tc.want)
		}
	}
	if n := g.gossipRefused.Load(); n != 1 {
		t.Errorf("gossipRefused = %d; want 1", n)
	}
}

func mustDecode(tb testing.TB, id string) peer.ID {
	tb.Helper()
	p, err := peer.Decode(id)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// testGate returns a gate of self listing self and others, logging to a
// buffer it keeps in g.log's handler, on a clock the test steps.
func testGate(tb testing.TB, self peer.ID, others ...peer.ID) *memberGate {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "members")
	ids := []string{self.String()}
	for _, p := range others {
		ids = append(ids, p.String())
	}
	writeMembers(tb, file, ids...)
	g, err := newMemberGate(file, self, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// A refused peer is logged at most once a minute, however often it
// knocks; each peer on its own clock; the file's own id missing is
// warned of.
func TestMembersRefusedLogRateLimited(t *testing.T) {
	_, idA := identity(t)
	_, idB := identity(t)
	_, idC := identity(t)
	_, idD := identity(t)
	pa, pb2, pc, pd := mustDecode(t, idA), mustDecode(t, idB), mustDecode(t, idC), mustDecode(t, idD)
	g := testGate(t, pa, pb2)
	var out syncbuf.Buffer
	g.log = slog.New(slog.NewTextHandler(&out, nil))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.now = func() time.Time { return now }
	count := func() int { return strings.Count(out.String(), "refused peer ") }

	for range 100 {
		if g.InterceptPeerDial(pc) {
			t.Fatal("InterceptPeerDial allowed an unlisted peer")
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("%d refusal lines for 100 dials within a minute; want 1:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "refused peer "+idC+": not in --members "+g.file) {
		t.Errorf("log does not say which peer and why:\n%s", out.String())
	}
	g.InterceptPeerDial(pd) // another peer: its own line
	now = now.Add(59 * time.Second)
	g.InterceptPeerDial(pc)
	if n := count(); n != 2 {
		t.Fatalf("%d refusal lines; want 2 (c once, d once)", n)
	}
	now = now.Add(time.Second)
	g.InterceptPeerDial(pc)
	if n := count(); n != 3 {
		t.Fatalf("%d refusal lines a minute on; want 3", n)
	}
	if !g.InterceptPeerDial(pa) || !g.InterceptPeerDial(pb2) {
		t.Fatal("a listed peer or self refused")
	}
	if in, outN := g.refusedIn.Load(), g.refusedOut.Load(); in != 0 || outN != 103 {
		t.Errorf("refused in %d, out %d; want 0, 103", in, outN)
	}

	// A list without this peer's own id: it still talks to itself, and says
	// that the others will refuse it.
	writeMembers(t, g.file, idB)
	if _, err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if !g.allows(pa) {
		t.Error("self refused")
	}
	if !strings.Contains(out.String(), "own id is not in --members") {
		t.Errorf("no warning for a list without this peer's id:\n%s", out.String())
	}
}

// lineWriter sends each log line written to it on a channel, dropping
// lines nobody waits for.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

// A host that a peer's --members does not list sees its dials to that
// peer succeed and the connection closed at once (the peer refuses it
// after the handshake); its join loop must take that as a failed dial and
// back off, not dial again as fast as handshakes go.
func TestJoinBacksOffWhenRefused(t *testing.T) {
	dirA, idA := identity(t)
	list := filepath.Join(t.TempDir(), "members")
	writeMembers(t, list, idA)
	a := mustHost(t, Config{DataDir: dirA, MembersFile: list})
	lines := make(lineWriter, 64)
	mustHost(t, Config{Join: []string{addrOf(t, a, "tcp")}, Logger: slog.New(slog.NewTextHandler(lines, nil))})
	deadline := time.After(testTimeout)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, "closed soon after it was made") && strings.Contains(l, idA) {
				if a.Stats().RefusedInbound == 0 {
					t.Fatal("the join loop saw its connection closed, but a refused none")
				}
				return
			}
		case <-deadline:
			t.Fatal("the refused host's join loop never backed off from a connection closed at once")
		}
	}
}

func TestAfterDrop(t *testing.T) {
	for _, tc := range []struct {
		upFor, backoff          time.Duration
		failures                int
		wantMin, wantMax, wantB time.Duration
		wantF                   int
	}{
		// Up for long: redial at once, backoff and failures reset.
		{joinStable, 8 * time.Second, 5, 0, 0, joinBackoffMin, 0},
		{time.Hour, joinBackoffMax, 9, 0, 0, joinBackoffMin, 0},
		// Closed at once (refused): wait the backoff (jittered), grow it.
		{time.Millisecond, joinBackoffMin, 0, joinBackoffMin / 2, 3 * joinBackoffMin / 2, 2 * joinBackoffMin, 1},
		{joinStable - 1, 2 * time.Second, 3, time.Second, 3 * time.Second, 4 * time.Second, 4},
		{0, joinBackoffMax, 7, joinBackoffMax / 2, 3 * joinBackoffMax / 2, joinBackoffMax, 8},
	} {
		wait, b, f := afterDrop(tc.upFor, tc.backoff, tc.failures)
		if wait < tc.wantMin || wait > tc.wantMax || b != tc.wantB || f != tc.wantF {
			t.Errorf("afterDrop(%v, %v, %d) = %v, %v, %d; want a wait in [%v, %v], %v, %d",
				tc.upFor, tc.backoff, tc.failures, wait, b, f, tc.wantMin, tc.wantMax, tc.wantB, tc.wantF)
		}
	}
}

// Lists that differ: b lists a, a does not list b. a refuses b's dials
// after the handshake; b, whose dial succeeded on its side, must say why
// its connection closed at once, naming its own id (the line a's file
// lacks), and hold back its next dials to a (dialPause) instead of
// redialing it twice a second.
func TestMembersRefusedByListedPeerLogged(t *testing.T) {
	dirA, idA := identity(t)
	dirB, idB := identity(t)
	listA := filepath.Join(t.TempDir(), "members")
	writeMembers(t, listA, idA)
	listB := filepath.Join(t.TempDir(), "members")
	writeMembers(t, listB, idA, idB)
	a := mustHost(t, Config{DataDir: dirA, MembersFile: listA})
	lines := make(lineWriter, 64)
	b := mustHost(t, Config{DataDir: dirB, MembersFile: listB, Join: []string{addrOf(t, a, "tcp")},
		Logger: slog.New(slog.NewTextHandler(lines, nil))})
	deadline := time.After(testTimeout)
	for {
		select {
		case l := <-lines:
			if !strings.Contains(l, "closed the connection right after the handshake") {
				continue
			}
			if !strings.Contains(l, "peer "+idA) || !strings.Contains(l, "("+idB+") in its --members") {
				t.Fatalf("the line does not name the refusing peer %s and this peer %s: %s", idA, idB, l)
			}
			if a.Stats().RefusedInbound == 0 {
				t.Fatal("b says a refused it, but a refused none")
			}
			if err := b.Connect(t.Context(), addrOf(t, a, "tcp")); !errors.Is(err, ErrDialPaused) {
				t.Fatalf("b dialed a again at once: Connect = %v; want %v", err, ErrDialPaused)
			}
			return
		case <-deadline:
			t.Fatal("b, refused by a peer it lists, never said that peer may not list it")
		}
	}
}
