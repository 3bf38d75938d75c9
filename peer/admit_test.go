package peer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// fakeDisk is a filesystem whose free space the test sets.
type fakeDisk struct {
	avail, total uint64
	err          error
	reads        int
}

func (d *fakeDisk) free(string) (uint64, uint64, error) {
	d.reads++
	return d.avail, d.total, d.err
}

// t0 is the tests' clock at their start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// markChecker returns a check of m at t0 plus at: past or not, as want
// says, what naming the case.
func markChecker(t *testing.T, m *mark) func(at time.Duration, want bool, what string) {
	return func(at time.Duration, want bool, what string) {
		t.Helper()
		if past, v, _ := m.check(t0.Add(at)); past != want {
			t.Errorf("%s (read %d MiB): past = %v, want %v", what, v>>20, past, want)
		}
	}
}

func TestDiskMark(t *testing.T) {
	const gib = 1 << 30
	d := &fakeDisk{avail: 10 * gib, total: 100 * gib}
	var told []string
	m := newDiskMark("/data", 512<<20, d.free, func(past bool, avail, limit uint64) {
		told = append(told, fmt.Sprintf("past=%v avail=%d limit=%d", past, avail>>20, limit>>20))
	})
	check := markChecker(t, m)
	check(0, false, "10 GiB free")
	d.avail = 100 << 20
	check(markEvery/2, false, "a reading younger than markEvery is trusted")
	check(markEvery, true, "100 MiB free under 512")
	d.err = errors.New("statfs: I/O error")
	check(3*markEvery, true, "a failed reading keeps the last")
	d.err, d.avail = nil, 520<<20
	check(4*markEvery, true, "520 MiB, just over the limit: not yet an eighth over it")
	d.avail = 2 * gib
	check(5*markEvery, false, "2 GiB free again")
	if want := []string{"past=true avail=100 limit=512", "past=false avail=2048 limit=512"}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Errorf("told %q, want %q (once per change)", told, want)
	}
	if d.reads != 6 { // the first sized the filesystem
		t.Errorf("%d readings of the filesystem, want 6", d.reads)
	}

	// A small filesystem caps the limit at a quarter of it; a negative
	// limit, or a filesystem that cannot be read, turn the check off.
	small := newDiskMark("/data", 512<<20, (&fakeDisk{avail: 50 << 20, total: 400 << 20}).free, nil)
	if small.limit != 100<<20 {
		t.Errorf("limit on 400 MiB = %d MiB, want 100", small.limit>>20)
	}
	if past, _, _ := small.check(t0); !past {
		t.Errorf("50 MiB free of 400 under a 100 MiB limit: not past")
	}
	for _, off := range []*mark{
		newDiskMark("/data", -1, (&fakeDisk{total: 100 * gib}).free, nil),
		newDiskMark("/data", 512<<20, (&fakeDisk{err: errors.New("no fs")}).free, nil),
		nil,
	} {
		if past, _, _ := off.check(t0); past {
			t.Errorf("mark off is past")
		}
	}
}

func TestHeapMark(t *testing.T) {
	live := uint64(100 << 20)
	var told []string
	m := newHeapMark(0, 2<<30, func() uint64 { return live }, func(past bool, l, limit uint64) {
		told = append(told, fmt.Sprintf("past=%v live=%d limit=%d", past, l>>20, limit>>20))
	})
	if m.limit != 1<<30 {
		t.Fatalf("default limit on 2 GiB = %d MiB, want half", m.limit>>20)
	}
	check := markChecker(t, m)
	check(0, false, "100 MiB live")
	live = 1100 << 20
	check(markEvery/2, false, "a reading younger than markEvery is trusted")
	check(markEvery, true, "1100 MiB live over 1024")
	live = 1000 << 20
	check(2*markEvery, true, "1000 MiB, just under the limit: not yet an eighth under it")
	live = 500 << 20
	check(3*markEvery, false, "500 MiB live")
	if want := []string{"past=true live=1100 limit=1024", "past=false live=500 limit=1024"}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Errorf("told %q, want %q", told, want)
	}
	for _, off := range []*mark{newHeapMark(-1, 2<<30, func() uint64 { return 1 << 40 }, nil), newHeapMark(0, 0, func() uint64 { return 1 << 40 }, nil)} {
		if past, _, _ := off.check(t0); past {
			t.Errorf("mark off is past")
		}
	}
	if m := newHeapMark(300<<20, 2<<30, nil, nil); m.limit != 300<<20 {
		t.Errorf("limit given 300 MiB = %d", m.limit>>20)
	}
	if memoryAvailable() == 0 {
		t.Errorf("memoryAvailable found no memory on this machine")
	}
}

// TestRefusal: the refusals say who, what and the flag, are a 507, and
// read as the client reads them.
func TestRefusal(t *testing.T) {
	for _, c := range []struct {
		reason string
		v      uint64
		want   string
	}{
		{"disk", 100 << 20, "peer peerA, the group's owner, has 100 MiB free under its data dir, under its --min-free-disk of 512 MiB"},
		{"memory", 600 << 20, "peer peerA, the group's owner, holds 600 MiB of live heap, over its --max-heap of 512 MiB"},
	} {
		err := refusal("peerA", c.reason, c.v, 512<<20)
		if !errors.Is(err, api.ErrInsufficientStorage) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInsufficientStorage starting %q", c.reason, err, c.want)
		}
		if ae := api.ErrorOf(err); ae.Status != http.StatusInsufficientStorage || ae.Code != api.CodeInsufficientStorage || ae.Message != err.Error() {
			t.Errorf("%s: API error = %d %s %q, want 507 insufficient_storage with the message as it is", c.reason, ae.Status, ae.Code, ae.Message)
		}
	}
}

// set replaces m's reading (and limit, when not 0) and forgets the last
// one (tests).
func (m *mark) set(v, limit uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read, m.at = func() (uint64, error) { return v, nil }, time.Time{}
	if limit != 0 {
		m.limit = limit
	}
}

// TestMeshRefusesWorkOfAFullOwner: an owner short of disk space, or over
// its heap limit, refuses the submissions of groups it owns with 507
// insufficient_storage, asked directly or through another peer, and
// creates nothing; the groups of the other owners are taken; once space
// is freed the same submission is.
func TestMeshRefusesWorkOfAFullOwner(t *testing.T) {
	for _, c := range []struct {
		name, says, reason string
		short              func(p *Peer, short bool)
	}{
		{"disk", "MiB free under its data dir", "disk", func(p *Peer, short bool) {
			avail := uint64(64 << 20)
			if !short {
				avail = 10 << 30
			}
			p.disk.set(avail, 512<<20)
		}},
		{"heap", "of live heap, over its --max-heap of 1024 MiB", "memory", func(p *Peer, short bool) {
			live := uint64(1536 << 20)
			if !short {
				live = 256 << 20
			}
			p.heap.set(live, 1<<30)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			peers := startMesh3(t)
			full := peers[0]
			c.short(full.p, true)
			refused := refusedKeys(t, peers, full, c.says)
			// Each refused twice, by the owner: asked through another
			// peer, and directly.
			want := fmt.Sprintf("needle_submissions_refused_total{reason=%q} %d\n", c.reason, 2*len(refused))
			if m := scrape(t, full.c.BaseURL); !strings.Contains(m, want) {
				t.Errorf("the full owner's /metrics lacks %q", want)
			}
			c.short(full.p, false)
			for _, key := range refused {
				body := fmt.Sprintf(`{"mode":"parallel","key":%q,"tasks":[{"handler":"echo","payload":1}]}`, key)
				res := submitRetrying(t, peers[1].c, body)
				if g, err := getGroupRetrying(t, peers[2].c, res.Group, 30*time.Second); err != nil || g.State != "SUCCEEDED" {
					t.Errorf("group %s once the owner took work again: %+v, %v", key, g, err)
				}
			}
		})
	}
}

// refusedKeys submits keyed groups through another peer and through full
// until full refused two and the others took two; it returns the keys
// full refused, after checking that each 507 names full and says says,
// and that nothing of a refused group exists.
func refusedKeys(t *testing.T, peers []*meshPeer, full *meshPeer, says string) []string {
	var refused []string
	taken := 0
	for i := 0; len(refused) < 2 || taken < 2; i++ {
		if i == 60 {
			t.Fatalf("after 60 keys: %d refused, %d taken", len(refused), taken)
		}
		key := fmt.Sprintf("order-%d", i)
		body := fmt.Sprintf(`{"mode":"parallel","key":%q,"tasks":[{"handler":"echo","payload":%d}]}`, key, i)
		var codes []string
		for _, via := range []*meshPeer{peers[1], full} {
			var code string
			waitFor(t, "an owner's answer", 20*time.Second, func() bool {
				_, err := via.c.SubmitGroupJSON(t.Context(), []byte(body))
				var ae *api.Error
				switch {
				case err == nil:
					code = "created"
				case errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable:
					return false
				case errors.As(err, &ae) && ae.Status == http.StatusInsufficientStorage:
					code = ae.Code
					if !strings.Contains(ae.Message, full.p.ID()) || !strings.Contains(ae.Message, says) {
						t.Errorf("507 does not name the full owner %s and say %q: %s", full.p.ID(), says, ae.Message)
					}
				default:
					t.Fatalf("submit %s: %v", key, err)
				}
				return true
			})
			codes = append(codes, code)
		}
		if codes[0] != codes[1] {
			t.Fatalf("key %s: through another peer %s, through the owner %s", key, codes[0], codes[1])
		}
		if codes[0] == "created" {
			taken++
			continue
		}
		if codes[0] != api.CodeInsufficientStorage {
			t.Fatalf("key %s: %s", key, codes[0])
		}
		refused = append(refused, key)
		if _, err := getGroupRetrying(t, peers[2].c, string(shard.KeyedGroupID(key)), 0); !errors.Is(err, shard.ErrNotFound) {
			t.Errorf("refused group %s: read %v, want not found (nothing created)", key, err)
		}
	}
	return refused
}

// TestMeshReplicaShortOfDiskDropsAppends: a replica with under half its
// --min-free-disk free drops the appends it is sent (counted): the groups
// of the other owners commit on their two other replicas and finish, this
// one holds none of them, and once space is freed it catches up.
func TestMeshReplicaShortOfDiskDropsAppends(t *testing.T) {
	peers := startMesh3(t)
	low := peers[2]
	low.p.disk.set(16<<20, 512<<20)
	var groups []string
	for i := 0; len(groups) < 4; i++ {
		if i == 40 {
			t.Fatalf("after 40 keys, %d groups taken", len(groups))
		}
		body := fmt.Sprintf(`{"mode":"parallel","key":"low-%d","tasks":[{"handler":"echo","payload":%d}]}`, i, i)
		var res *api.SubmitGroupResponse
		waitFor(t, "an owner's answer", 20*time.Second, func() bool {
			var err error
			res, err = peers[0].c.SubmitGroupJSON(t.Context(), []byte(body))
			var ae *api.Error
			switch {
			case errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable:
				return false
			case errors.As(err, &ae) && ae.Status == http.StatusInsufficientStorage:
				res = nil // owned by the replica short of space
			case err != nil:
				t.Fatalf("submit: %v", err)
			}
			return true
		})
		if res != nil {
			groups = append(groups, res.Group)
		}
	}
	replicaGroup := func(id string) (shard.GroupView, error) {
		var v shard.GroupView
		err := low.p.read(t.Context(), func(n *node.Node) (err error) { v, err = n.ReplicaGroup(shard.GroupID(id)); return err })
		return v, err
	}
	for _, id := range groups {
		if g, err := getGroupRetrying(t, peers[1].c, id, 30*time.Second); err != nil || g.State != "SUCCEEDED" {
			t.Fatalf("group %s with a replica short of space: %+v, %v", id, g, err)
		}
		if _, err := replicaGroup(id); !errors.Is(err, shard.ErrNotFound) {
			t.Errorf("the replica short of space holds group %s (%v): it took an append", id, err)
		}
	}
	if m := scrape(t, low.c.BaseURL); strings.Contains(m, "needle_replica_appends_dropped_total 0\n") || !strings.Contains(m, "needle_replica_appends_dropped_total ") {
		t.Errorf("needle_replica_appends_dropped_total does not count the dropped appends")
	}
	low.p.disk.set(10<<30, 0)
	for _, id := range groups {
		waitFor(t, "the replica to catch up with group "+id, 20*time.Second, func() bool {
			v, err := replicaGroup(id)
			return err == nil && v.State == shard.GroupSucceeded
		})
	}
}
