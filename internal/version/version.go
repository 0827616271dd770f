// Package version names the build of a sluice program: the release version
// and the source revision it was built from. Release builds stamp both with
// the linker (the Makefile and the Dockerfile pass
// -X github.com/sluice-dev/sluice/internal/version.version=… and
// ….revision=…); a plain `go build` or `go install` falls back to what the
// Go build information knows.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped by the linker; empty in an unstamped build.
var (
	version  string
	revision string
)

// devel is the version of a build from a checkout that nobody stamped.
const devel = "devel"

// Version is the release version, the module version of a `go install`, or
// "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return devel
}

// Revision is the source revision (a commit hash), or "unknown".
func Revision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// String is the line a program prints for --version, e.g.
// "router v0.1.0 (revision 3472ef7…, go1.26.8 linux/amd64)".
func String(program string) string {
	return fmt.Sprintf("%s %s (revision %s, %s %s/%s)", program, Version(), Revision(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
