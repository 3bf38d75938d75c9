package peer

import (
	"runtime"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/needle-mesh/needle/node"
)

// gather returns the metric family name of m's registry, or fails.
func gather(tb testing.TB, m *metrics, name string) *dto.MetricFamily {
	tb.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	tb.Fatalf("metric %s not exposed", name)
	return nil
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestBuildInfoMetric(t *testing.T) {
	m := newMetrics(&Peer{cfg: Config{Slots: 2, Version: "v1.2.3", Commit: "abc"}, handlers: NewRegistry()})
	mf := gather(t, m, "needle_build_info")
	if len(mf.GetMetric()) != 1 {
		t.Fatalf("needle_build_info has %d series; want 1", len(mf.GetMetric()))
	}
	s := mf.GetMetric()[0]
	got, want := labelsOf(s), map[string]string{"version": "v1.2.3", "commit": "abc", "goversion": runtime.Version()}
	if s.GetGauge().GetValue() != 1 || len(got) != len(want) || got["version"] != want["version"] || got["commit"] != want["commit"] || got["goversion"] != want["goversion"] {
		t.Errorf("needle_build_info = %v %v; want 1 %v", got, s.GetGauge().GetValue(), want)
	}
}

// The identity conflicts a node declared (two live processes under one
// peer id) are counted as needle_protocol_events_total{event="identity_conflicts"}.
func TestIdentityConflictsEvent(t *testing.T) {
	for _, e := range protocolEvents(node.NodeStats{IdentityConflicts: 3}, node.NodeStats{IdentityConflicts: 1}) {
		if e.name == "identity_conflicts" {
			if e.now != 3 || e.was != 1 {
				t.Errorf("identity_conflicts: now %d was %d; want 3 and 1", e.now, e.was)
			}
			return
		}
	}
	t.Error("no identity_conflicts protocol event")
}

// The partitions a node recovered as their last voter (needle forget
// --unsafe-recover) are counted as
// needle_protocol_events_total{event="unsafe_recoveries"}.
func TestUnsafeRecoveriesEvent(t *testing.T) {
	for _, e := range protocolEvents(node.NodeStats{UnsafeRecoveries: 5}, node.NodeStats{UnsafeRecoveries: 2}) {
		if e.name == "unsafe_recoveries" {
			if e.now != 5 || e.was != 2 {
				t.Errorf("unsafe_recoveries: now %d was %d; want 5 and 2", e.now, e.was)
			}
			return
		}
	}
	t.Error("no unsafe_recoveries protocol event")
}
