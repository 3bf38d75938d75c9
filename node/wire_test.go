package node

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

func wireSamples() []Message {
	return []Message{
		{Type: MsgRaft, From: "a", Raft: []RaftMsg{{Partition: 3, Msg: &pb.Message{Type: pb.MsgApp, To: uint64(7), From: uint64(9),
			Entries: []pb.Entry{{Index: uint64(4), Term: uint64(2), Data: []byte("x")}}}}}},
		{Type: MsgHeartbeat, From: "b", Heartbeat: &Heartbeat{Boot: "n", Partitions: 256, Load: Load{Ready: 3, Running: 1, Slots: 2},
			Members: []string{"a", "b"}, Forgotten: []string{"z"}, Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, Draining: true,
			Labels: []string{"gpu=true", "zone=a"}, Stranded: 5, StrandedFor: []string{"c", "d"}, Features: Features,
			Workers:  []WorkerAd{{Handler: "resize", Want: 8, Workers: []string{"w1", "w2"}}, {Handler: "resize", Labels: []string{"zone=a"}, Want: 1}},
			Replicas: 3, Placement: ring.PlacementSpread, Inc: 1_700_000_000_123, Sync: SyncPull, Sum: 0xfedcba9876543210, Version: "v1.4.0",
			Recover: []string{"x", "z"}, Book: []PeerAddrs{{ID: "c", Addrs: []string{"/ip4/127.0.0.1/tcp/2"}}, {ID: "d"}},
			Claims: []RecoverClaim{{Partition: 4, Term: 3, Index: 1 << 33, Survivors: []string{"b", "c"}}, {Partition: 65536, Survivors: []string{"b"}}}}},
		{Type: MsgProbe, From: "g", Probe: &Probe{Kind: ProbeAck, Seq: 9, Target: "h", Boot: "2", Inc: 77, Features: Features, Load: Load{Ready: 1, Slots: 4},
			Updates: []Update{{ID: "h", Boot: "1", Inc: 3, State: PeerSuspect}, {ID: "i", State: peerForgotten}, {ID: "j", Inc: 4, State: PeerAlive, Addrs: []string{"/ip4/10.0.0.1/tcp/1"}}}}},
		{Type: MsgProbe, From: "g", Probe: &Probe{Kind: ProbePing, Seq: 10, Boot: "2", Inc: 77, Features: Features, BeatFollows: true}},
		{Type: MsgProbe, From: "g", Probe: &Probe{Kind: ProbeAck, Seq: 12, Boot: "2", Inc: 77, Features: Features, Plain: true}},
		{Type: MsgProbe, From: "g", Probe: &Probe{Kind: ProbePing, Seq: 13, Boot: "2", Inc: 77, Features: Features, Plain: true, Version: "v1.4.0"}},
		{Type: MsgProbe, From: "g", Probe: &Probe{Kind: ProbePing, Seq: 11, Boot: "2", Inc: 77, Features: Features,
			Updates: []Update{{ID: "j", Inc: 4, State: PeerAlive, Addrs: []string{"/ip4/10.0.0.1/tcp/1"}}},
			Beat: &Heartbeat{Boot: "2", Partitions: 256, Members: []string{"g", "h"}, Addrs: []string{"/ip4/127.0.0.1/tcp/3"},
				Features: Features, Replicas: 3, Inc: 77, Sync: SyncPull, Book: []PeerAddrs{{ID: "h", Addrs: []string{"/ip4/127.0.0.1/tcp/4"}}}},
			Version: "(devel)"}},
		{Type: MsgOutcome, From: "c", Outcomes: []OutcomeMsg{{Task: "g.1", Round: 2, Holder: "c#1", OK: true, Result: []byte(`{"r":1}`)},
			{Task: "g.2", Round: 1, Holder: "c#1", Error: "boom", Permanent: true, TimedOut: true},
			{Task: "g.6", Round: 3, Holder: "c#1", Lost: true, Died: shard.DiedAlone, Error: "worker w lost"},
			{Task: "g.7", Round: 1, Holder: "c#1", Lost: true, Died: shard.DiedWithOthers}}},
		{Type: MsgAck, From: "d", Acks: []AckMsg{{Task: "g.1", Round: 2}}},
		{Type: MsgStealReq, From: "e", Want: 4, Load: Load{Slots: 2}, Holder: "e#b1"},
		{Type: MsgGrant, From: "f", Load: Load{Ready: 10}, Grants: []Grant{{Task: "g.3", Round: 1,
			Expiry: time.Unix(1_700_000_000, 5).UTC(), Handler: "echo", Payload: []byte("1"), Timeout: time.Second, Attempt: 2,
			Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Shard: 1, Shards: 3, Require: []string{"zone=a"}, Worker: "resizer-1",
			Created: time.Unix(1_699_999_000, 7).UTC(), Name: "resize", Pin: "12D3KooWpin",
			Info: shard.RunInfo{Priority: -7, MaxAttempts: 3, Error: "disk full", Stage: 2, Item: 41}},
			{Task: "g.4", Round: 1, Handler: "sum", Timeout: time.Second, Deaths: shard.Deaths{Shared: 1, Alone: 2},
				Inputs: map[string]json.RawMessage{"b": json.RawMessage(`[1,2]`), "a": json.RawMessage(`"x"`)}}}, Holder: "t#7"},
		{Type: MsgGrant, From: "f", Load: Load{Ready: 1}, Grants: []Grant{{Task: "g.5", Round: 2, Handler: "echo"}}}, // from an older peer: no holder
		{Type: MsgGrant, From: "f", Refused: true},
		{Type: MsgGrant, From: "f", Load: Load{Ready: 3, Slots: 2}, Refused: true, NotNow: true},
		{Type: MsgReplicaAsk, From: "g", Asks: []uint32{0, 7, 255, 4095}},
		{Type: MsgReplicaGone, From: "h", Gone: []GoneMsg{{Partition: 7, Index: 12}, {Partition: 4095, Index: 1 << 40}}},
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, m := range wireSamples() {
		b, err := AppendMessage(nil, &m)
		if err != nil {
			t.Fatalf("encode %v: %v", m.Type, err)
		}
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("decode %v: %v", m.Type, err)
		}
		again, _ := AppendMessage(nil, &got)
		if !reflect.DeepEqual(b, again) {
			t.Errorf("%v does not round-trip", m.Type)
		}
		for cut := 0; cut < len(b); cut++ {
			got, err := DecodeMessage(b[:cut])
			// A heartbeat without its labels, and a grant without its
			// holder, are what older peers send.
			oldHeartbeat := m.Type == MsgHeartbeat && cut == len(b)-len(heartbeatTail(m.Heartbeat))
			featLen, workersLen, idsLen, placeLen, incLen, bookLen, sumLen, versionLen, recoverLen, claimsLen := 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
			if m.Type == MsgHeartbeat {
				claimsLen = len(appendClaims(nil, m.Heartbeat.Claims))
				recoverLen = len(appendStrings(nil, m.Heartbeat.Recover)) + claimsLen
				versionLen = len(shard.AppendString(nil, m.Heartbeat.Version)) + recoverLen
				sumLen = len(binary.AppendUvarint(nil, m.Heartbeat.Sum)) + versionLen
				bookLen = len(appendBook(nil, m.Heartbeat.Book)) + sumLen
				incLen = len(binary.AppendUvarint(nil, m.Heartbeat.Inc)) + 1 + bookLen
				featLen = len(binary.AppendUvarint(nil, m.Heartbeat.Features))
				placeLen = len(appendPlacement(nil, m.Heartbeat)) + incLen
				idsLen = len(appendWorkerIDs(nil, m.Heartbeat.Workers)) + placeLen
				workersLen = len(appendWorkerAds(nil, m.Heartbeat.Workers)) + idsLen
			}
			beforeInc := m.Type == MsgHeartbeat && cut == len(b)-incLen
			beforeSync := m.Type == MsgHeartbeat && cut == len(b)-1-bookLen
			beforeBook := m.Type == MsgHeartbeat && cut == len(b)-bookLen
			beforeSum := m.Type == MsgHeartbeat && cut == len(b)-sumLen
			beforeVersion := m.Type == MsgHeartbeat && cut == len(b)-versionLen
			beforeRecover := m.Type == MsgHeartbeat && cut == len(b)-recoverLen
			beforeClaims := m.Type == MsgHeartbeat && cut == len(b)-claimsLen
			beforeAddrs := m.Type == MsgProbe && probeAddrsCut(m.Probe, len(b)-cut)
			beforeFor := m.Type == MsgHeartbeat && cut == len(b)-workersLen-featLen-len(appendStrings(nil, m.Heartbeat.StrandedFor))
			beforeFeatures := m.Type == MsgHeartbeat && cut == len(b)-workersLen-featLen
			beforeWorkers := m.Type == MsgHeartbeat && cut == len(b)-workersLen
			beforeIDs := m.Type == MsgHeartbeat && cut == len(b)-idsLen
			beforePlacement := m.Type == MsgHeartbeat && cut == len(b)-placeLen
			attemptsLen, tracesLen, shardsLen, requiresLen, workersLen, marksLen, tasksLen, infosLen := 0, 0, 0, 0, 0, 0, 0, 0
			if m.Type == MsgGrant {
				infosLen = len(grantInfos(m.Grants))
				tasksLen = len(grantTasks(m.Grants)) + infosLen
				marksLen = len(grantDeaths(m.Grants)) + tasksLen
				workersLen = len(grantWorkers(m.Grants)) + marksLen
				requiresLen = len(grantRequires(m.Grants)) + workersLen
				shardsLen = len(grantShards(m.Grants)) + requiresLen
				tracesLen = len(grantTraces(m.Grants)) + shardsLen
				attemptsLen = len(grantAttempts(m.Grants)) + tracesLen
			}
			oldGrant := m.Type == MsgGrant && cut == len(b)-attemptsLen-len(shard.AppendString(nil, m.Holder))
			beforeAttempts := m.Type == MsgGrant && cut == len(b)-attemptsLen
			beforeTraces := m.Type == MsgGrant && cut == len(b)-tracesLen
			beforeShards := m.Type == MsgGrant && cut == len(b)-shardsLen
			beforeRequires := m.Type == MsgGrant && cut == len(b)-requiresLen
			beforeGrantWorkers := m.Type == MsgGrant && cut == len(b)-workersLen
			beforeMarks := m.Type == MsgGrant && cut == len(b)-marksLen
			beforeTasks := m.Type == MsgGrant && cut == len(b)-tasksLen
			beforeInfos := m.Type == MsgGrant && cut == len(b)-infosLen
			oldSteal := m.Type == MsgStealReq && cut == len(b)-len(shard.AppendString(nil, m.Holder))
			if err == nil && !oldHeartbeat && !beforeInc && !beforeSync && !beforeBook && !beforeSum && !beforeVersion && !beforeRecover && !beforeClaims && !beforeAddrs && !beforeFor && !beforeFeatures && !beforeWorkers && !beforeIDs && !beforePlacement && !oldGrant && !beforeAttempts && !beforeTraces &&
				!beforeShards && !beforeRequires && !beforeGrantWorkers && !beforeMarks && !beforeTasks && !beforeInfos && !oldSteal {
				t.Fatalf("%v truncated to %d/%d bytes decoded", m.Type, cut, len(b))
			}
			if err == nil && oldSteal && got.Holder != "" {
				t.Fatalf("a steal request without its holder decoded holder %q", got.Holder)
			}
			if err == nil && oldHeartbeat && (got.Heartbeat.Labels != nil || got.Heartbeat.Stranded != 0) {
				t.Fatalf("a heartbeat without its labels tail decoded labels %v", got.Heartbeat.Labels)
			}
			if err == nil && beforeFor && (got.Heartbeat.StrandedFor != nil || got.Heartbeat.Stranded != m.Heartbeat.Stranded) {
				t.Fatalf("a heartbeat without StrandedFor decoded %v, stranded %d", got.Heartbeat.StrandedFor, got.Heartbeat.Stranded)
			}
			if err == nil && beforeSum && (got.Heartbeat.Sum != 0 || len(got.Heartbeat.Book) != len(m.Heartbeat.Book)) {
				t.Fatalf("a heartbeat without Sum decoded sum %x, a book of %d", got.Heartbeat.Sum, len(got.Heartbeat.Book))
			}
			if err == nil && (beforeSum || beforeVersion) && got.Heartbeat.Version != "" {
				t.Fatalf("a heartbeat without Version decoded version %q", got.Heartbeat.Version)
			}
			if err == nil && beforeRecover && (got.Heartbeat.Recover != nil || got.Heartbeat.Version != m.Heartbeat.Version) {
				t.Fatalf("a heartbeat without Recover decoded %v, version %q", got.Heartbeat.Recover, got.Heartbeat.Version)
			}
			if err == nil && beforeClaims && (got.Heartbeat.Claims != nil || !slices.Equal(got.Heartbeat.Recover, m.Heartbeat.Recover)) {
				t.Fatalf("a heartbeat without Claims decoded %v, recover %v", got.Heartbeat.Claims, got.Heartbeat.Recover)
			}
			if err == nil && beforeVersion && got.Heartbeat.Sum != m.Heartbeat.Sum {
				t.Fatalf("a heartbeat without Version decoded sum %x", got.Heartbeat.Sum)
			}
			if err == nil && beforeFeatures && got.Heartbeat.Features != 0 {
				t.Fatalf("a heartbeat without Features decoded features %d", got.Heartbeat.Features)
			}
			if err == nil && (beforeInc || beforeSync) && (got.Heartbeat.Sync != 0 || beforeInc && got.Heartbeat.Inc != 0) {
				t.Fatalf("a heartbeat without Inc or Sync decoded %d, %d", got.Heartbeat.Inc, got.Heartbeat.Sync)
			}
			if err == nil && beforeWorkers && (got.Heartbeat.Workers != nil || got.Heartbeat.Features != m.Heartbeat.Features) {
				t.Fatalf("a heartbeat without Workers decoded %+v", got.Heartbeat.Workers)
			}
			if err == nil && beforeIDs && (len(got.Heartbeat.Workers) != len(m.Heartbeat.Workers) ||
				slices.ContainsFunc(got.Heartbeat.Workers, func(w WorkerAd) bool { return w.Workers != nil })) {
				t.Fatalf("a heartbeat without worker ids decoded %+v", got.Heartbeat.Workers)
			}
			if err == nil && (beforeIDs || beforePlacement) && (got.Heartbeat.Replicas != 0 || got.Heartbeat.Placement != 0) {
				t.Fatalf("a heartbeat without its placement decoded replicas %d, placement %v", got.Heartbeat.Replicas, got.Heartbeat.Placement)
			}
			if err == nil && beforePlacement && !reflect.DeepEqual(got.Heartbeat.Workers, m.Heartbeat.Workers) {
				t.Fatalf("a heartbeat without its placement decoded workers %+v", got.Heartbeat.Workers)
			}
			if err == nil && oldGrant && got.Holder != "" {
				t.Fatalf("a grant without its holder decoded holder %q", got.Holder)
			}
			if err == nil && (oldGrant || beforeAttempts) && slices.ContainsFunc(got.Grants, func(g Grant) bool { return g.Attempt != 0 }) {
				t.Fatalf("a grant without its attempts decoded %+v", got.Grants)
			}
			if err == nil && (oldGrant || beforeAttempts || beforeTraces) && slices.ContainsFunc(got.Grants, func(g Grant) bool { return g.Trace != "" }) {
				t.Fatalf("a grant without its traces decoded %+v", got.Grants)
			}
			if err == nil && (oldGrant || beforeAttempts || beforeTraces || beforeShards) && slices.ContainsFunc(got.Grants, func(g Grant) bool { return g.Shards != 0 }) {
				t.Fatalf("a grant without its shards decoded %+v", got.Grants)
			}
			if err == nil && beforeGrantWorkers && slices.ContainsFunc(got.Grants, func(g Grant) bool { return g.Worker != "" }) {
				t.Fatalf("a grant without its workers decoded %+v", got.Grants)
			}
			if err == nil && (beforeMarks || beforeTasks) && slices.ContainsFunc(got.Grants, func(g Grant) bool { return !g.Created.IsZero() || g.Name != "" || g.Pin != "" }) {
				t.Fatalf("a grant without its creation times, names and pins decoded %+v", got.Grants)
			}
			if err == nil && (beforeMarks || beforeTasks || beforeInfos) && slices.ContainsFunc(got.Grants, func(g Grant) bool { return g.Info != shard.RunInfo{} }) {
				t.Fatalf("a grant without its run infos decoded %+v", got.Grants)
			}
		}
	}
	if _, err := DecodeMessage([]byte{9, 1}); err == nil {
		t.Error("a wrong version decoded")
	}
	if _, err := DecodeMessage([]byte{WireVersion, 99}); err == nil {
		t.Error("an unknown type decoded")
	}
}

// grantAttempts is the grant message's tail appended after the holder.
func grantAttempts(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = binary.AppendUvarint(b, uint64(g.Attempt))
	}
	return b
}

// grantRequires is the grant message's tail appended after the shards.
func grantRequires(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = appendStrings(b, g.Require)
	}
	return b
}

// grantTasks is the grant message's tail appended after the deaths.
func grantTasks(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = shard.AppendTime(b, g.Created)
		b = shard.AppendString(b, g.Name)
		b = shard.AppendString(b, g.Pin)
	}
	return b
}

// grantInfos is the grant message's tail appended after the creation
// times.
func grantInfos(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for i := range gs {
		b = appendRunInfo(b, &gs[i].Info)
	}
	return b
}

// grantDeaths is the grant message's tail appended after the workers.
func grantDeaths(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = append(b, g.Deaths.Mark())
	}
	return b
}

// grantWorkers is the grant message's tail appended after the requires.
func grantWorkers(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = shard.AppendString(b, g.Worker)
	}
	return b
}

// grantShards is the grant message's tail appended after the traces.
func grantShards(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(g.Shard)), uint64(g.Shards))
	}
	return b
}

// grantTraces is the grant message's tail appended after the attempts.
func grantTraces(gs []Grant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(gs)))
	for _, g := range gs {
		b = shard.AppendString(b, g.Trace)
	}
	return b
}

// probeAddrsCut reports whether a probe's encoding less its last tail
// bytes ends before its flags byte, between the address lists of its
// updates or before them: it decodes as one from an older peer, with the
// lists before the cut.
func probeAddrsCut(p *Probe, tail int) bool {
	n := 1 // the flags byte: a probe without it is an older peer's
	if p.Beat != nil {
		n += len(shard.AppendBytes(nil, appendHeartbeat(nil, p.Beat)))
	}
	if p.Version != "" {
		n += len(shard.AppendString(nil, p.Version))
	}
	if tail == n {
		return true
	}
	for i := len(p.Updates) - 1; i >= 0; i-- {
		n += len(appendStrings(nil, p.Updates[i].Addrs))
		if tail == n {
			return true
		}
	}
	return false
}

// heartbeatTail is the part of a heartbeat's encoding appended with
// labels and after: without it, a heartbeat decodes as one from an older
// peer.
func heartbeatTail(h *Heartbeat) []byte {
	b := appendPlacement(appendWorkerIDs(appendWorkerAds(binary.AppendUvarint(appendStrings(binary.AppendUvarint(appendStrings(nil, h.Labels), uint64(h.Stranded)), h.StrandedFor), h.Features), h.Workers), h.Workers), h)
	b = binary.AppendUvarint(appendBook(append(binary.AppendUvarint(b, h.Inc), h.Sync), h.Book), h.Sum)
	return appendClaims(appendStrings(shard.AppendString(b, h.Version), h.Recover), h.Claims)
}

// A heartbeat of the release before Replicas and Placement (the layout
// up to the workers' ids) decodes with Replicas 0, which Step takes as
// before; the fuzz test starts from it too.
func TestHeartbeatWithoutPlacementDecodes(t *testing.T) {
	b := oldHeartbeat(t)
	m, err := DecodeMessage(b)
	if err != nil {
		t.Fatalf("heartbeat without its placement: %v", err)
	}
	if h := m.Heartbeat; h.Replicas != 0 || h.Placement != 0 || h.Features != Features || len(h.Workers) != 1 || h.Workers[0].Workers[0] != "w1" {
		t.Errorf("heartbeat without its placement decoded as %+v", h)
	}
	n, err := NewNode(DefaultNodeConfig("p1", "1"), nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step("old", m); err != nil {
		t.Errorf("Step(heartbeat without its placement) = %v", err)
	}
}

// oldHeartbeat encodes a heartbeat as the release before Replicas and
// Placement did.
func oldHeartbeat(tb testing.TB) []byte {
	hb := &Heartbeat{Boot: "n", Partitions: 256, Members: []string{"a"}, Features: Features,
		Workers: []WorkerAd{{Handler: "h", Want: 1, Workers: []string{"w1"}}}, Replicas: 3}
	b, err := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
	if err != nil {
		tb.Fatal(err)
	}
	tail := len(appendPlacement(nil, hb)) + len(binary.AppendUvarint(nil, hb.Inc)) + 1 + len(appendBook(nil, hb.Book)) + len(binary.AppendUvarint(nil, hb.Sum)) +
		len(shard.AppendString(nil, hb.Version)) + len(appendStrings(nil, hb.Recover)) + len(appendClaims(nil, hb.Claims))
	return b[:len(b)-tail]
}

// unversionedHeartbeat encodes a heartbeat as the release before Version
// did (the layout up to Sum).
func unversionedHeartbeat(tb testing.TB) []byte {
	hb := &Heartbeat{Boot: "n", Partitions: 256, Members: []string{"a"}, Features: Features, Replicas: 3, Inc: 9, Sum: 0x1234, Version: "v9"}
	b, err := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
	if err != nil {
		tb.Fatal(err)
	}
	return b[:len(b)-len(shard.AppendString(nil, hb.Version))-len(appendStrings(nil, hb.Recover))-len(appendClaims(nil, hb.Claims))]
}

// unrecoveringHeartbeat encodes a heartbeat as the release before Recover
// did (the layout up to Version).
func unrecoveringHeartbeat(tb testing.TB) []byte {
	hb := &Heartbeat{Boot: "n", Partitions: 256, Members: []string{"a"}, Forgotten: []string{"z"}, Features: Features, Replicas: 3, Version: "v9", Recover: []string{"z"}}
	b, err := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
	if err != nil {
		tb.Fatal(err)
	}
	return b[:len(b)-len(appendStrings(nil, hb.Recover))-len(appendClaims(nil, hb.Claims))]
}

// unclaimingHeartbeat encodes a heartbeat as the release before Claims
// did (the layout up to Recover).
func unclaimingHeartbeat(tb testing.TB) []byte {
	hb := &Heartbeat{Boot: "n", Partitions: 256, Members: []string{"a"}, Features: Features, Replicas: 3, Version: "v9", Recover: []string{"z"},
		Claims: []RecoverClaim{{Partition: 1, Term: 2, Index: 9, Survivors: []string{"a", "p1"}}}}
	b, err := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
	if err != nil {
		tb.Fatal(err)
	}
	return b[:len(b)-len(appendClaims(nil, hb.Claims))]
}

// A heartbeat of the release before Recover decodes with no recover
// marks and its other fields; one with them carries them, and a peer that
// steps it holds the marks (and spreads them in its own heartbeats).
func TestHeartbeatRecover(t *testing.T) {
	m, err := DecodeMessage(unrecoveringHeartbeat(t))
	if err != nil {
		t.Fatalf("heartbeat without Recover: %v", err)
	}
	if h := m.Heartbeat; h.Recover != nil || h.Version != "v9" || !slices.Equal(h.Forgotten, []string{"z"}) {
		t.Fatalf("heartbeat without Recover decoded as %+v", h)
	}
	n, err := NewNode(DefaultNodeConfig("p1", "1"), nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step("a", m); err != nil {
		t.Fatalf("Step(heartbeat without Recover) = %v", err)
	}
	if got := n.UnsafeRecover(); len(got) != 0 {
		t.Fatalf("marks after a heartbeat without Recover = %v", got)
	}
	hb := *m.Heartbeat
	hb.Recover = []string{"p1", "z"} // its own id is never taken
	b, _ := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: &hb})
	if m, err = DecodeMessage(b); err != nil || !slices.Equal(m.Heartbeat.Recover, hb.Recover) {
		t.Fatalf("heartbeat with Recover decoded as %+v, %v", m.Heartbeat, err)
	}
	if err := n.Step("a", m); err != nil {
		t.Fatalf("Step(heartbeat with Recover) = %v", err)
	}
	if got := n.UnsafeRecover(); !slices.Equal(got, []string{"z"}) {
		t.Fatalf("marks after a heartbeat with Recover = %v; want z", got)
	}
	if got := n.mesh.heartbeat().Heartbeat.Recover; !slices.Equal(got, []string{"z"}) {
		t.Fatalf("own heartbeat carries %v; want z", got)
	}
	rd := n.Ready()
	if !slices.ContainsFunc(rd.Persist.MetaPut, func(r wal.Record) bool { return r.Key == RecoverMetaKey && string(r.Value) == "z\n" }) || !rd.MustSync {
		t.Fatalf("Ready persists %+v (sync %v); want the recover record, synced", rd.Persist.MetaPut, rd.MustSync)
	}
}

// A heartbeat of the release before Version decodes with Version "",
// which /v1/peers shows as unknown, and the member it comes from shows
// none; a heartbeat with it names the sender's version there.
func TestHeartbeatVersion(t *testing.T) {
	m, err := DecodeMessage(unversionedHeartbeat(t))
	if err != nil {
		t.Fatalf("heartbeat without its version: %v", err)
	}
	if h := m.Heartbeat; h.Version != "" || h.Sum != 0x1234 || h.Inc != 9 {
		t.Fatalf("heartbeat without its version decoded as %+v", h)
	}
	cfg := DefaultNodeConfig("p1", "1")
	cfg.Version = "v1.4.0"
	n, err := NewNode(cfg, nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step("a", m); err != nil {
		t.Fatalf("Step(heartbeat without its version) = %v", err)
	}
	versionOf := func(id string) string {
		for _, mb := range n.Members() {
			if mb.ID == id {
				return mb.Version
			}
		}
		t.Fatalf("no member %s", id)
		return ""
	}
	if v := versionOf("a"); v != "" {
		t.Errorf("a peer of an older release shows version %q", v)
	}
	if v := versionOf("p1"); v != "v1.4.0" {
		t.Errorf("this peer shows version %q; want its own", v)
	}
	if v := n.mesh.heartbeat().Heartbeat.Version; v != "v1.4.0" {
		t.Errorf("this peer's heartbeat names version %q; want its own", v)
	}
	m.Heartbeat.Version = "v1.5.0"
	if err := n.Step("a", m); err != nil {
		t.Fatal(err)
	}
	if v := versionOf("a"); v != "v1.5.0" {
		t.Errorf("a peer's heartbeat with version v1.5.0 shows %q", v)
	}
}

func TestHeartbeatWithoutLabelsDecodes(t *testing.T) {
	hb := &Heartbeat{Boot: "n", Partitions: 16, Members: []string{"a"}, Labels: []string{"zone=a"}, Stranded: 2}
	b, err := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
	if err != nil {
		t.Fatal(err)
	}
	old := b[:len(b)-len(heartbeatTail(hb))] // the layout before labels
	m, err := DecodeMessage(old)
	if err != nil {
		t.Fatalf("old heartbeat: %v", err)
	}
	if m.Heartbeat.Boot != "n" || m.Heartbeat.Labels != nil || m.Heartbeat.Stranded != 0 {
		t.Errorf("old heartbeat decoded as %+v", m.Heartbeat)
	}
	// A newer peer's heartbeat, with fields appended after these, decodes
	// to what this version knows of it.
	newer, err := DecodeMessage(append(slices.Clone(b), 0x07, 'f', 'u', 't', 'u', 'r', 'e'))
	if err != nil || !slices.Equal(newer.Heartbeat.Labels, hb.Labels) || newer.Heartbeat.Stranded != 2 {
		t.Errorf("newer heartbeat = %+v, %v; want its known fields", newer.Heartbeat, err)
	}
	if _, err := DecodeMessage(append(slices.Clone(b[:len(b)-7]), 0x80)); err == nil { // Inc cut short (before Sync, Book, Sum, Version, Recover and Claims)
		t.Error("a heartbeat cut inside a known field decoded")
	}
	for _, bad := range [][]string{{"zone"}, {"zone=b", "zone=a"}, {"a=1", "a=1"}, {"k=v w"}} {
		hb.Labels = bad
		b, _ := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
		if _, err := DecodeMessage(b); err == nil {
			t.Errorf("heartbeat with labels %q decoded", bad)
		}
	}
}

// FuzzDecodeMessage: decoding never panics, and what decodes re-encodes
// to something that decodes to the same message.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range wireSamples() {
		b, _ := AppendMessage(nil, &m)
		f.Add(b)
	}
	f.Add(oldHeartbeat(f))
	f.Add(unversionedHeartbeat(f))
	f.Add(unrecoveringHeartbeat(f))
	f.Add(unclaimingHeartbeat(f))
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := DecodeMessage(p)
		if err != nil {
			return
		}
		b, err := AppendMessage(nil, &m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		m2, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		b2, _ := AppendMessage(nil, &m2)
		if string(b) != string(b2) {
			t.Fatal("not stable")
		}
	})
}

// The node refuses a malformed message and stays up.
func TestStepRefusesBadMessages(t *testing.T) {
	h := newHarness(t, 4)
	bad := []Message{
		{Type: MsgHeartbeat, From: "x"},                                       // no body
		{Type: MsgHeartbeat, From: "x", Heartbeat: &Heartbeat{Partitions: 7}}, // wrong partition count
		{Type: MsgRaft, From: "x", Raft: []RaftMsg{{Partition: 99, Msg: &pb.Message{}}}},
		{Type: MsgRaft, From: "x", Raft: []RaftMsg{{Partition: 1, Msg: &pb.Message{Type: pb.MsgHup, To: h.n.raftID, From: RaftID("x")}}}},
		{Type: 77, From: "x"},
	}
	for _, m := range bad {
		if err := h.n.Step("x", m); err == nil {
			t.Errorf("Step(%v) accepted a malformed message", m.Type)
		}
	}
	if err := h.n.Step("", Message{Type: MsgAck}); err == nil {
		t.Error("Step from an empty sender accepted")
	}
	h.stabilize()
	r := h.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "echo"}}})
	if r.Err != nil {
		t.Fatalf("node does not serve after bad messages: %v", r.Err)
	}
}

func TestStepBadHeartbeatAddsNoMember(t *testing.T) {
	h := newHarness(t, 4)
	_ = h.n.Step("intruder", Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Partitions: 7}})
	_ = h.n.Step("intruder", Message{Type: MsgOutcome})
	for _, m := range h.n.Members() {
		if m.ID == "intruder" {
			t.Fatal("a peer with a wrong partition count became a member")
		}
	}
}

// A message a newer peer extended (fields appended after the ones this
// version knows) decodes to what this version knows of it, so a mesh can
// be upgraded one peer at a time.
func TestWireSkipsAppendedFields(t *testing.T) {
	for _, m := range wireSamples() {
		b, err := AppendMessage(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeMessage(append(slices.Clone(b), 0x03, 'n', 'e', 'w'))
		if err != nil {
			t.Fatalf("%v with appended bytes: %v", m.Type, err)
		}
		if again, _ := AppendMessage(nil, &got); !bytes.Equal(again, b) {
			t.Errorf("%v with appended bytes decoded to something else", m.Type)
		}
	}
}

// A heartbeat's Workers are checked where they enter: a worker without a
// handler, or with labels not sorted, unique and valid, is refused.
func TestHeartbeatWorkersChecked(t *testing.T) {
	for _, bad := range []WorkerAd{{Handler: ""}, {Handler: "h", Labels: []string{"zone"}},
		{Handler: "h", Labels: []string{"z=1", "a=1"}}, {Handler: "h", Labels: []string{"a=1", "a=1"}},
		{Handler: "h", Workers: []string{""}}, {Handler: "h", Workers: []string{"w2", "w1"}}, {Handler: "h", Workers: []string{"w", "w"}}} {
		hb := &Heartbeat{Boot: "n", Partitions: 16, Workers: []WorkerAd{{Handler: "ok", Want: 1}, bad}}
		b, _ := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: hb})
		if _, err := DecodeMessage(b); err == nil {
			t.Errorf("heartbeat with worker %+v decoded", bad)
		}
	}
}

// "Not now" travels as the refusal's byte, 2: a peer of this release
// reads both flags, an older one (which reads any non-zero byte as a
// refusal) backs off as it always did.
func TestGrantNotNowWire(t *testing.T) {
	b, err := AppendMessage(nil, &Message{Type: MsgGrant, From: "f", Refused: true, NotNow: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMessage(b)
	if err != nil || !m.Refused || !m.NotNow {
		t.Fatalf("decoded %+v, %v; want Refused and NotNow", m, err)
	}
	b, _ = AppendMessage(nil, &Message{Type: MsgGrant, From: "f", Refused: true})
	if m, err := DecodeMessage(b); err != nil || !m.Refused || m.NotNow {
		t.Fatalf("a plain refusal decoded %+v, %v", m, err)
	}
}

// A plain probe carries the sender's version (Probe.Version) after its
// flags and heartbeat; one of an older peer has none, and a newer peer's
// appended fields after it are skipped. A version flagged but cut short
// or empty is refused.
func TestProbeVersionWire(t *testing.T) {
	p := &Probe{Kind: ProbeAck, Seq: 3, Boot: "b", Inc: 5, Features: Features, Plain: true, Version: "v1.4.0"}
	b, err := AppendMessage(nil, &Message{Type: MsgProbe, From: "a", Probe: p})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMessage(append(slices.Clone(b), 0x02, 'x', 'y'))
	if err != nil || m.Probe.Version != "v1.4.0" || !m.Probe.Plain {
		t.Fatalf("plain probe with a version (and a newer peer's tail) = %+v, %v", m.Probe, err)
	}
	old := slices.Clone(b[:len(b)-len(shard.AppendString(nil, p.Version))])
	old[len(old)-1] &^= probeVersion // the flags byte, as an older peer writes it
	if m, err := DecodeMessage(old); err != nil || m.Probe.Version != "" || !m.Probe.Plain {
		t.Fatalf("plain probe of an older peer = %+v, %v; want no version", m.Probe, err)
	}
	if _, err := DecodeMessage(b[:len(b)-1]); err == nil {
		t.Error("a probe with its version cut short decoded")
	}
	empty := slices.Clone(old)
	empty[len(empty)-1] |= probeVersion
	if _, err := DecodeMessage(append(empty, 0)); err == nil {
		t.Error("a probe with an empty version flagged decoded")
	}
}

// A Raft message from a peer never carries Responses (only a node's own
// storage messages do), and Responses is the one field whose decoding
// recurses: a frame of them nested a few million deep would take the
// decoder past Go's stack limit, a crash no recover catches. The decoder
// refuses the field at the top level, whatever it holds.
func TestWireRefusesRaftResponses(t *testing.T) {
	nested := func(depth int) []byte {
		// From the innermost level out: each is the Responses tag and the
		// length of what it holds.
		lens := make([]uint64, depth)
		for i := 1; i < depth; i++ {
			lens[i] = 1 + uint64(len(binary.AppendUvarint(nil, lens[i-1]))) + lens[i-1]
		}
		var b []byte
		for i := depth - 1; i >= 0; i-- {
			b = append(b, raftResponsesField<<3|2)
			b = binary.AppendUvarint(b, lens[i])
		}
		return b
	}
	// frame is a MsgRaft frame from n1 holding one encoded Raft message.
	frame := func(raw []byte) []byte {
		b := append([]byte{WireVersion, byte(MsgRaft)}, shard.AppendString(nil, "n1")...)
		b = binary.AppendUvarint(b, 1) // one message
		b = binary.AppendUvarint(b, 0) // partition
		return shard.AppendBytes(b, raw)
	}
	for name, raw := range map[string][]byte{
		"one response": func() []byte {
			b, err := (&pb.Message{Type: pb.MsgApp, To: 2, From: 1, Responses: []pb.Message{{Type: pb.MsgAppResp}}}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}(),
		"after other fields":  append([]byte{0x08, byte(pb.MsgHeartbeat), 0x10, 2}, nested(3)...),
		"nested 100,000 deep": nested(100_000),
	} {
		if _, err := DecodeMessage(frame(raw)); !errors.Is(err, ErrWire) {
			t.Errorf("%s: DecodeMessage = %v; want ErrWire", name, err)
		}
	}
	// The same frame without Responses decodes.
	raw, err := (&pb.Message{Type: pb.MsgApp, To: 2, From: 1, Entries: []pb.Entry{{Index: 1, Term: 1, Data: []byte("x")}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := DecodeMessage(frame(raw)); err != nil || len(m.Raft) != 1 || len(m.Raft[0].Msg.Entries) != 1 {
		t.Fatalf("DecodeMessage of a plain append = %+v, %v", m, err)
	}
}
