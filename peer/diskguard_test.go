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

// TestMeshRefusesWorkOfAFullOwner: an owner short of disk space refuses
// the submissions of groups it owns with 507 insufficient_storage, asked
// directly or through another peer, and creates nothing; the groups of the
// other owners are taken; once space is freed the same submission is.
func TestMeshRefusesWorkOfAFullOwner(t *testing.T) {
	peers := startMesh3(t)
	full := peers[0]
	disk := &fakeDisk{avail: 64 << 20, total: 100 << 30}
	full.p.setDisk(disk)
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
					if !strings.Contains(ae.Message, full.p.ID()) {
						t.Errorf("507 does not name the full owner %s: %s", full.p.ID(), ae.Message)
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
	disk.avail = 10 << 30
	full.p.setDisk(disk)
	for _, key := range refused {
		body := fmt.Sprintf(`{"mode":"parallel","key":%q,"tasks":[{"handler":"echo","payload":1}]}`, key)
		res := submitRetrying(t, peers[1].c, body)
		if g, err := getGroupRetrying(t, peers[2].c, res.Group, 10*time.Second); err != nil || g.State != "SUCCEEDED" {
			t.Errorf("group %s after space came back: %+v, %v", key, g, err)
		}
	}
}
