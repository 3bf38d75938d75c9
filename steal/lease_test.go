package steal

import (
	"errors"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

func TestLeaseOf(t *testing.T) {
	exp := t0.Add(time.Minute)
	good := shard.Event{Type: shard.EvLeased, Group: "g", Task: "g.0", Round: 3, Holder: "p1#a", Expiry: exp}
	tests := []struct {
		name    string
		ev      shard.Event
		wantErr bool
	}{
		{"leased", good, false},
		{"renewed", shard.Event{Type: shard.EvRenewed, Task: "g.0", Round: 3, Holder: "p1#a", Expiry: exp}, false},
		{"not a lease", shard.Event{Type: shard.EvSucceeded, Task: "g.0", Round: 3, Holder: "p1#a"}, true},
		{"malformed task", shard.Event{Type: shard.EvLeased, Task: "g", Round: 3, Holder: "p1#a", Expiry: exp}, true},
		{"round 0", shard.Event{Type: shard.EvLeased, Task: "g.0", Holder: "p1#a", Expiry: exp}, true},
		{"no holder", shard.Event{Type: shard.EvLeased, Task: "g.0", Round: 3, Expiry: exp}, true},
		{"no expiry", shard.Event{Type: shard.EvLeased, Task: "g.0", Round: 3, Holder: "p1#a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := LeaseOf(tt.ev)
			if (err != nil) != tt.wantErr {
				t.Fatalf("LeaseOf(%+v) = %+v, %v; want error %v", tt.ev, l, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrNotLease) && tt.ev.Type == shard.EvSucceeded {
				t.Fatalf("LeaseOf(succeeded) = %v; want ErrNotLease", err)
			}
		})
	}
	l, _ := LeaseOf(good)
	if want := (Lease{Task: "g.0", Round: 3, Holder: "p1#a", Expiry: exp}); l != want {
		t.Fatalf("LeaseOf = %+v; want %+v", l, want)
	}
	if l.Expired(exp.Add(-1)) || !l.Expired(exp) {
		t.Fatalf("Expired around %v is wrong", exp)
	}
	if o := l.Outcome(true); o.Task != l.Task || o.Round != l.Round || o.Holder != l.Holder || !o.OK {
		t.Fatalf("Outcome(true) = %+v", o)
	}
}

// TestLeaseFencedByShard: the outcome of a lease received with a grant is
// accepted by the owner while the lease is current, and refused once it
// expired and the task was leased again.
func TestLeaseFencedByShard(t *testing.T) {
	cfg := shard.DefaultConfig()
	s, err := shard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.SetLeader(true, t0)
	ev, _, err := s.Submit(t0, &shard.GroupSpec{ID: "g", Mode: shard.ModeSingle,
		Tasks: []shard.TaskSpec{{Handler: "h", Timeout: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Apply([]shard.Event{ev})
	evs := s.Lease(t0, 1, "thief#1", nil)
	s.Apply(evs)
	stolen, err := LeaseOf(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(s.Due(stolen.Expiry))
	s.Apply(s.Lease(stolen.Expiry, 1, "owner#1", nil))
	if _, err := s.Report(stolen.Expiry, stolen.Outcome(true)); !errors.Is(err, shard.ErrStaleRound) {
		t.Fatalf("Report(expired lease) = %v; want ErrStaleRound", err)
	}
	v, _ := s.Task(stolen.Task)
	current := Lease{Task: v.ID, Round: v.Round, Holder: v.Holder}
	if _, err := s.Report(stolen.Expiry, current.Outcome(true)); err != nil {
		t.Fatalf("Report(current lease) = %v; want accepted", err)
	}
}
