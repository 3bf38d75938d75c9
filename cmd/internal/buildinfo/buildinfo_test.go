package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	recorded := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name            string
		version, commit string
		read            func() (*debug.BuildInfo, bool)
		wantV, wantC    string
	}{
		{"stamped wins", "v1.2.3", "deadbeef", recorded, "v1.2.3", "deadbeef"},
		{"toolchain record", "", "", recorded, "v0.9.0", "abc123"},
		{"nothing known", "", "", none, "(devel)", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.version, tt.commit, tt.read)
			if got.Version != tt.wantV || got.Commit != tt.wantC || got.GoVersion == "" {
				t.Errorf("resolve = %+v; want version %q commit %q", got, tt.wantV, tt.wantC)
			}
		})
	}
}
