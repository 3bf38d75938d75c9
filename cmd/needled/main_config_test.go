package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "needle.conf")
	body := "# a config file\nslots = 7\nhttp = 127.0.0.1:9000\nretention = 1h\nhttp-allow = http://a/\nhttp-allow = http://b/\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NEEDLE_HTTP": "127.0.0.1:8000", "NEEDLE_API_TOKEN": "s3cret"}
	m := NewMain()
	m.Stderr = &strings.Builder{}
	if err := m.ParseFlags([]string{"--config", cfg, "--slots", "3"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.Slots != 3 || c.HTTPAddr != "127.0.0.1:8000" || c.Retention != time.Hour || c.Token != "s3cret" {
		t.Errorf("config = slots %d http %q retention %v token %q; want flag 3, env 127.0.0.1:8000, file 1h, env token",
			c.Slots, c.HTTPAddr, c.Retention, c.Token)
	}
	if got := c.Builtins.HTTPAllow; len(got) != 2 {
		t.Errorf("http-allow = %v; want two prefixes from the file", got)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.conf")
	_ = os.WriteFile(bad, []byte("nope = 1\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "bogus"},
		{"bad duration", []string{"--retention", "soon"}, "retention"},
		{"bad exec allow", []string{"--exec-allow", "noequals"}, "exec-allow"},
		{"unknown flag in file", []string{"--config", bad}, `unknown flag "nope"`},
		{"missing file", []string{"--config", "/nonexistent/x"}, "--config"},
		{"stray argument", []string{"extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = &strings.Builder{}
			err := m.ParseFlags(tt.args, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFlags(%v) = %v; want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
}
