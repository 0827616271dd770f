package build

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// makeTimeout bounds `make -n`, which only prints recipes (and runs the
// Makefile's few $(shell git ...) calls).
const makeTimeout = time.Minute

// goBuild is the start of the Makefile's GO_BUILD once expanded: a static,
// trimmed build stamped with the version.
const goBuild = `CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/sluice-dev/sluice/internal/version.version=`

// programPackage matches a package of this repository that is a program:
// the commands, the bench programs and the local control plane.
var programPackage = regexp.MustCompile(`(^|\s)\./(cmd|bench|hack/devcluster)\b`)

// dryRun returns the recipes `make -n` prints for targets, with bin/ and
// the soak's output in a temporary directory so that nothing of the
// worktree's is considered up to date.
func dryRun(t *testing.T, targets ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), makeTimeout)
	defer cancel()
	dir := t.TempDir()
	args := append([]string{"-n", "-C", repoRoot, "BIN=" + filepath.Join(dir, "bin"), "SOAK_OUT=" + filepath.Join(dir, "soak")}, targets...)
	out, err := exec.CommandContext(ctx, "make", args...).CombinedOutput() //nolint:gosec // the repository's own Makefile.
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Split(string(out), "\n")
}

// TestProgramsBuiltOneWay checks that each target that runs a program
// builds it with GO_BUILD, never with a plain `go build` or `go run`, and
// builds each program once.
func TestProgramsBuiltOneWay(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   []string // the program packages the target builds
	}{
		{"build", []string{"./cmd/...", "./hack/devcluster"}},
		{"demo", []string{"./cmd/router", "./cmd/enginesim", "./bench/demo"}},
		{"run-manager", []string{"./cmd/manager"}},
		{"soak", []string{"./cmd/router", "./cmd/enginesim", "./bench/soak"}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			built := map[string]int{}
			for _, line := range dryRun(t, tc.target) {
				if !programPackage.MatchString(line) || !strings.Contains(line, "go ") {
					continue
				}
				if !strings.Contains(line, goBuild) {
					t.Errorf("make %s builds a program without GO_BUILD's flags:\n%s", tc.target, line)
				}
				for _, field := range strings.Fields(line) {
					if programPackage.MatchString(field) {
						built[field]++
					}
				}
			}
			for _, pkg := range tc.want {
				if built[pkg] != 1 {
					t.Errorf("make %s builds %s %d times, want once", tc.target, pkg, built[pkg])
				}
			}
			if len(built) != len(tc.want) {
				t.Errorf("make %s builds %v, want exactly %v", tc.target, built, tc.want)
			}
		})
	}
}
