// Package buildinfo names the build of the needle binaries: the module
// version and the commit they were built from.
//
// A release build stamps both with the linker:
//
//	go build -ldflags "-X github.com/needle-mesh/needle/cmd/internal/buildinfo.Version=v1.2.3 \
//	  -X github.com/needle-mesh/needle/cmd/internal/buildinfo.Commit=$(git rev-parse HEAD)" ./cmd/...
//
// Without them, Get falls back to what the Go toolchain recorded in the
// binary (runtime/debug.ReadBuildInfo): the main module's version ("(devel)"
// for a build from a checkout) and the vcs.revision of the checkout.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are set with -ldflags "-X ..." by release builds.
var Version, Commit string

// Info describes one build.
type Info struct {
	Version   string // module version, e.g. v1.2.3; "(devel)" when unknown
	Commit    string // VCS revision; "unknown" when not recorded
	GoVersion string // the Go toolchain, e.g. go1.26.8
}

// Get returns the build's Info: the stamped values first, then the
// toolchain's record.
func Get() Info {
	return resolve(Version, Commit, debug.ReadBuildInfo)
}

func resolve(version, commit string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		if in.Version == "" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && in.Commit == "" {
				in.Commit = s.Value
			}
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	return in
}

// String is the line --version prints: "<program> <version> (commit <commit>, <go>)".
func (in Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s)", in.Version, in.Commit, in.GoVersion)
}
