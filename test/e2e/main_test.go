package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins holds the paths of the binaries built once for the package.
var bins struct {
	router, enginesim string
	// plainRouter is the router built without the race detector, whose
	// shadow memory would swamp a memory bound: the router itself when
	// the tests run without it.
	plainRouter string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain builds the router and enginesim into a temporary directory (with
// the race detector when the tests run with it, so races in the processes
// fail the tests too, and then a plain router besides), runs the tests and
// removes the directory.
func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/sluice-dev/sluice/cmd/router", "github.com/sluice-dev/sluice/cmd/enginesim")
	cmd := exec.Command("go", args...) //nolint:gosec,noctx // building the project's own packages before any test runs.
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the binaries:", err)
		return 1
	}
	bins.router, bins.enginesim = filepath.Join(dir, "router"), filepath.Join(dir, "enginesim")
	bins.plainRouter = bins.router
	if raceEnabled {
		bins.plainRouter = filepath.Join(dir, "router-plain")
		cmd := exec.Command("go", "build", "-o", bins.plainRouter, "github.com/sluice-dev/sluice/cmd/router") //nolint:gosec,noctx // as above.
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building the plain router:", err)
			return 1
		}
	}
	return m.Run()
}
