package peer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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

func TestDiskGuard(t *testing.T) {
	const gib = 1 << 30
	d := &fakeDisk{avail: 10 * gib, total: 100 * gib}
	var told []string
	g := newDiskGuard("/data", 512<<20, d.free, func(low bool, avail, min uint64) {
		told = append(told, fmt.Sprintf("low=%v avail=%d min=%d", low, avail>>20, min>>20))
	})
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := g.check(t0, "peerA"); err != nil {
		t.Fatalf("10 GiB free: %v", err)
	}
	d.avail = 100 << 20
	if err := g.check(t0.Add(diskCheckEvery/2), "peerA"); err != nil {
		t.Fatalf("a reading younger than %v is trusted; got %v", diskCheckEvery, err)
	}
	err := g.check(t0.Add(diskCheckEvery), "peerA")
	if !errors.Is(err, api.ErrInsufficientStorage) {
		t.Fatalf("100 MiB free under 512: %v, want ErrInsufficientStorage", err)
	}
	if strings.HasPrefix(err.Error(), "api:") {
		t.Errorf("error %q: the client reads it as it is", err)
	}
	for _, want := range []string{"peer peerA", "100 MiB free", "--min-free-disk of 512 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if ae := api.ErrorOf(err); ae.Status != http.StatusInsufficientStorage || ae.Code != api.CodeInsufficientStorage {
		t.Errorf("API error = %d %s, want 507 insufficient_storage", ae.Status, ae.Code)
	}
	d.err = errors.New("statfs: I/O error")
	if err := g.check(t0.Add(3*diskCheckEvery), "peerA"); err == nil {
		t.Errorf("a failed reading forgot the last one")
	}
	d.err, d.avail = nil, 520<<20
	if err := g.check(t0.Add(4*diskCheckEvery), "peerA"); err == nil {
		t.Fatalf("520 MiB free, just over the minimum: work taken again before an eighth over it")
	}
	d.avail = 2 * gib
	if err := g.check(t0.Add(5*diskCheckEvery), "peerA"); err != nil {
		t.Fatalf("2 GiB free again: %v", err)
	}
	if want := []string{"low=true avail=100 min=512", "low=false avail=2048 min=512"}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Errorf("told %q, want %q (once per change)", told, want)
	}
	if d.reads != 6 { // the first sized the filesystem
		t.Errorf("%d readings of the filesystem, want 6", d.reads)
	}

	// A small filesystem caps the minimum at a quarter of it; 0, a
	// negative minimum or an unreadable filesystem turn the check off.
	small := newDiskGuard("/data", 512<<20, (&fakeDisk{avail: 50 << 20, total: 400 << 20}).free, nil)
	if small.Min() != 100<<20 {
		t.Errorf("min on 400 MiB = %d MiB, want 100", small.Min()>>20)
	}
	if err := small.check(t0, "peerA"); !errors.Is(err, api.ErrInsufficientStorage) {
		t.Errorf("50 MiB free of 400 under a 100 MiB minimum: %v", err)
	}
	for _, off := range []*diskGuard{
		newDiskGuard("/data", -1, (&fakeDisk{total: 100 * gib}).free, nil),
		newDiskGuard("/data", 512<<20, (&fakeDisk{err: errors.New("no fs")}).free, nil),
		nil,
	} {
		if err := off.check(t0, "peerA"); err != nil {
			t.Errorf("guard off: %v", err)
		}
	}
}

// setDisk replaces p's reading of its filesystem (tests).
func (p *Peer) setDisk(d *fakeDisk) {
	g := p.disk
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free, g.at = d.free, time.Time{}
}

// setHeap replaces p's reading of its live heap (tests).
func (p *Peer) setHeap(live uint64, max uint64) {
	g := p.heap
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live, g.max, g.at = func() uint64 { return live }, max, time.Time{}
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
			d := &fakeDisk{avail: 64 << 20, total: 100 << 30}
			if !short {
				d.avail = 10 << 30
			}
			p.setDisk(d)
		}},
		{"heap", "of live heap, over its --max-heap of 1024 MiB", "memory", func(p *Peer, short bool) {
			live := uint64(1536 << 20)
			if !short {
				live = 256 << 20
			}
			p.setHeap(live, 1<<30)
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
				if g, err := getGroupRetrying(t, peers[2].c, res.Group, 10*time.Second); err != nil || g.State != "SUCCEEDED" {
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

func TestHeapGuard(t *testing.T) {
	live := uint64(100 << 20)
	var told []string
	g := newHeapGuard(0, 2<<30, func() uint64 { return live }, func(over bool, l, max uint64) {
		told = append(told, fmt.Sprintf("over=%v live=%d max=%d", over, l>>20, max>>20))
	})
	if g.max != 1<<30 {
		t.Fatalf("default max on 2 GiB = %d MiB, want half", g.max>>20)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := g.check(t0, "peerA"); err != nil {
		t.Fatalf("100 MiB live: %v", err)
	}
	live = 1100 << 20
	if err := g.check(t0.Add(diskCheckEvery/2), "peerA"); err != nil {
		t.Fatalf("a reading younger than %v is trusted; got %v", diskCheckEvery, err)
	}
	err := g.check(t0.Add(diskCheckEvery), "peerA")
	if !errors.Is(err, api.ErrInsufficientStorage) || !strings.Contains(err.Error(), "peer peerA, the group's owner, holds 1100 MiB of live heap, over its --max-heap of 1024 MiB") {
		t.Fatalf("1100 MiB live over 1024: %v", err)
	}
	live = 1000 << 20
	if err := g.check(t0.Add(2*diskCheckEvery), "peerA"); err == nil {
		t.Errorf("1000 MiB, just under the max: work taken again before an eighth under it")
	}
	live = 500 << 20
	if err := g.check(t0.Add(3*diskCheckEvery), "peerA"); err != nil {
		t.Errorf("500 MiB live: %v", err)
	}
	if want := []string{"over=true live=1100 max=1024", "over=false live=500 max=1024"}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Errorf("told %q, want %q", told, want)
	}
	for _, off := range []*heapGuard{newHeapGuard(-1, 2<<30, func() uint64 { return 1 << 40 }, nil), newHeapGuard(0, 0, func() uint64 { return 1 << 40 }, nil), nil} {
		if err := off.check(t0, "peerA"); err != nil {
			t.Errorf("guard off: %v", err)
		}
	}
	if g := newHeapGuard(300<<20, 2<<30, nil, nil); g.max != 300<<20 {
		t.Errorf("max given 300 MiB = %d", g.max>>20)
	}
	if memoryAvailable() == 0 {
		t.Errorf("memoryAvailable found no memory on this machine")
	}
}
