package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFlagsLabels(t *testing.T) {
	file := filepath.Join(t.TempDir(), "needle.conf")
	if err := os.WriteFile(file, []byte("label = rack=r1\nlabel = zone=c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want map[string]string
	}{
		{"flags", []string{"--label", "zone=a", "--label", "gpu=true"}, nil, map[string]string{"zone": "a", "gpu": "true"}},
		{"env list", nil, map[string]string{"NEEDLE_LABELS": "zone=a,gpu=true"}, map[string]string{"zone": "a", "gpu": "true"}},
		{"env of the flag", nil, map[string]string{"NEEDLE_LABEL": "zone=b"}, map[string]string{"zone": "b"}},
		{"flag wins over env", []string{"--label", "zone=a"}, map[string]string{"NEEDLE_LABELS": "zone=b"}, map[string]string{"zone": "a"}},
		{"config file", []string{"--config", file}, nil, map[string]string{"rack": "r1", "zone": "c"}},
		{"env wins over file", []string{"--config", file}, map[string]string{"NEEDLE_LABELS": "zone=e"}, map[string]string{"zone": "e"}},
		{"none", nil, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = &strings.Builder{}
			if err := m.ParseFlags(tt.args, func(k string) string { return tt.env[k] }); err != nil {
				t.Fatal(err)
			}
			if got := m.Config.Labels; !maps.Equal(got, tt.want) {
				t.Errorf("Labels = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestParseFlagsBadLabels(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--label", "gpu"}, "", `"gpu" is not key=value`},
		{[]string{"--label", "=x"}, "", "must not be empty"},
		{[]string{"--label", "zone=a", "--label", "zone=b"}, "", `label "zone" given twice`},
		{nil, "zone=a,oops", `NEEDLE_LABELS="zone=a,oops": "oops" is not key=value`},
	} {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		err := m.ParseFlags(tt.args, func(k string) string {
			if k == "NEEDLE_LABELS" {
				return tt.env
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFlags(%v, NEEDLE_LABELS=%q) = %v; want an error containing %q", tt.args, tt.env, err, tt.want)
		}
	}
}
