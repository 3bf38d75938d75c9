package api

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
)

var commitT0 = time.Unix(1_700_000_000, 0).UTC()

// commitShard returns a leading shard with the peer's Next.
func commitShard(tb testing.TB) *shard.Shard {
	tb.Helper()
	cfg := shard.DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(1, 1))
	cfg.Next = cron.Next
	s, err := shard.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.SetLeader(true, commitT0)
	return s
}

// commit encodes evs as a Raft entry's batch, decodes it as a replica
// does and applies it: what the edge accepted must commit and apply.
func commit(t *testing.T, s *shard.Shard, evs ...shard.Event) {
	t.Helper()
	b, err := shard.DecodeBatch(shard.AppendBatch(nil, &shard.Batch{Origin: "o", Events: evs}))
	if err != nil {
		t.Fatalf("an entry the edge accepted does not decode: %v", err)
	}
	before := s.Rejected()
	s.Apply(b.Events)
	if s.Rejected() != before {
		t.Fatalf("an entry the edge accepted was rejected by Apply")
	}
}

// checkRestores snapshots s and restores the snapshot elsewhere.
func checkRestores(t *testing.T, s *shard.Shard) {
	t.Helper()
	snap := s.Snapshot()
	back := commitShard(t)
	if err := back.Restore(snap); err != nil {
		t.Fatalf("Restore(Snapshot()): %v", err)
	}
	if !bytes.Equal(back.Snapshot(), snap) {
		t.Fatal("Snapshot(Restore(Snapshot())) differs")
	}
}

// FuzzCommit drives a request body end to end, as POST /v1/tasks,
// /v1/groups and /v1/schedules do: the API decoder, the core's validation
// (Submit, SetSchedule), the Raft entry's codec, Apply on a replica, timers
// firing, a snapshot and its restore. Nothing the edge accepts may fail
// past it: an entry that commits but cannot apply stopped every replica.
func FuzzCommit(f *testing.F) {
	for _, tt := range badGroups {
		f.Add(byte(1), []byte(tt.body))
	}
	for _, s := range []string{
		`{"mode": "dag", "tasks": [{"name": "a", "handler": "echo", "delay": "1s"}, {"name": "b", "handler": "echo", "deps": ["a"]}]}`,
		`{"mode": "pipeline", "stages": [{"name": "p", "handler": "echo", "concurrency": 2147483648}], "items": [1]}`,
		`{"mode": "pipeline", "stages": [{"name": "p", "handler": "echo", "concurrency": 2}, {"name": "q", "handler": "sleep", "timeout": "1s"}], "items": [1, {"a": 2}]}`,
		`{"mode": "staged", "stages": [[{"handler": "echo", "retry": {"max_attempts": 3, "backoff": "2562047h"}}], [{"handler": "echo"}]]}`,
	} {
		f.Add(byte(1), []byte(s))
	}
	f.Add(byte(0), []byte(`{"handler": "echo", "delay": "2562047h", "timeout": "1h"}`))
	f.Add(byte(2), []byte(`{"every": "1m", "group": {"mode": "parallel", "tasks": [{"handler": "echo"}]}}`))
	f.Add(byte(2), []byte(`{"cron": "*/5 * * * * *", "group": {"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "concurrency": 2147483648}], "items": [1]}}`))
	f.Add(byte(2), []byte(`{"every": "2562047h", "group": {"mode": "dag", "tasks": [{"name": "a", "handler": "echo"}]}}`))
	f.Fuzz(func(t *testing.T, route byte, body []byte) {
		s := commitShard(t)
		lim := testLimits()
		switch route % 3 {
		case 0, 1:
			decode := DecodeGroup
			if route%3 == 0 {
				decode = DecodeTask
			}
			spec, err := decode(bytes.NewReader(body), lim)
			if err != nil {
				return
			}
			spec.ID = "g1"
			ev, _, err := s.Submit(commitT0, spec)
			if err != nil {
				t.Fatalf("Submit of a spec the edge accepted: %v", err)
			}
			commit(t, s, ev)
		case 2:
			sp, _, err := DecodeSchedule(bytes.NewReader(body), lim)
			if err != nil {
				return
			}
			sp.ID = "s1"
			ev, _, err := s.SetSchedule(commitT0, sp, "")
			if err != nil {
				if strings.Contains(err.Error(), "never") {
					return // a cron expression with no tick after commitT0
				}
				t.Fatalf("SetSchedule of a schedule the edge accepted: %v", err)
			}
			commit(t, s, ev)
		}
		for _, d := range []time.Duration{time.Second, time.Hour, 400 * 24 * time.Hour} {
			if evs := s.Due(commitT0.Add(d)); len(evs) > 0 {
				commit(t, s, evs...)
			}
		}
		checkRestores(t, s)
	})
}
