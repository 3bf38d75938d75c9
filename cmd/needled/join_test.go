package main

import (
	"slices"
	"strings"
	"testing"
)

func TestWithoutSelf(t *testing.T) {
	joins := []string{
		"/dns4/needle-0.needle-peers/tcp/4001",
		"needle-0.needle-peers.default.svc.cluster.local:4001",
		"NEEDLE-0:4001",
		"/dns/needle-0/tcp/4001/p2p/12D3KooWGzRcSUH7ouMCaGZ8CmZDEuMfSSJGYL2ybU2ZjjFNK6Fo",
		"/dns4/needle-00/tcp/4001",
		"/dns4/needle-1.needle-peers/tcp/4001",
		"/ip4/10.0.0.1/tcp/4001",
		"needle-0x:4001",
	}
	kept, dropped := withoutSelf(joins, "needle-0")
	if want := joins[4:]; !slices.Equal(kept, want) {
		t.Errorf("kept %v; want %v", kept, want)
	}
	if want := joins[:4]; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v; want %v", dropped, want)
	}
	if kept, dropped := withoutSelf(joins, ""); !slices.Equal(kept, joins) || dropped != nil {
		t.Errorf("no self name: kept %v dropped %v; want every join kept", kept, dropped)
	}
}

// The StatefulSet pattern: one NEEDLE_JOIN for every pod, NEEDLE_SELF_NAME
// from the pod name. needle-0 founds, needle-1 joins.
func TestParseFlagsSelfName(t *testing.T) {
	for _, tc := range []struct {
		self string
		join []string
	}{
		{"needle-0", nil},
		{"needle-1", []string{"needle-0.needle-peers:4001"}},
	} {
		env := map[string]string{"NEEDLE_JOIN": "needle-0.needle-peers:4001", "NEEDLE_SELF_NAME": tc.self}
		m := NewMain()
		m.Stderr = &strings.Builder{}
		if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Config.Join, tc.join) {
			t.Errorf("%s: join = %v; want %v", tc.self, m.Config.Join, tc.join)
		}
	}
}
