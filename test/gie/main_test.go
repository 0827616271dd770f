//go:build gie

package gie

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/test/netnstest"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// bins holds the paths of the programs the test runs.
var bins struct {
	// router and enginesim are built once for the package (with the race
	// detector when the tests run with it).
	router, enginesim string
	// picker is the endpoint picker and crdDir its InferencePool CRD, both
	// from `make gie-bins` (hack/gie/build.sh).
	picker, crdDir string
	// assets is the envtest control plane (`make envtest-bins`).
	assets string
}

// TestMain runs the tests in a network namespace of their own
// (netnstest). The picker binds every interface of the namespace, the
// routers their own loopback addresses (127.0.0.2 and up), and no port
// of the machine is taken.
func TestMain(m *testing.M) {
	if code, exit := netnstest.Enter("gie test"); exit {
		os.Exit(code)
	}
	os.Exit(runMain(m))
}

// runMain finds the picker and the control plane, builds the router and enginesim into a temporary
// directory, runs the tests and removes the directory.
func runMain(m *testing.M) int {
	// envtest logs through controller-runtime's logger; the test reads
	// the processes' output instead.
	logf.SetLogger(logr.Discard())
	if err := findBins(); err != nil {
		fmt.Fprintln(os.Stderr, "gie test:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "sluice-gie-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gie test:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/sluice-dev/sluice/cmd/router", "github.com/sluice-dev/sluice/cmd/enginesim")
	cmd := exec.CommandContext(context.Background(), "go", args...) //nolint:gosec // building the project's own packages before any test runs.
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "gie test: building the binaries:", err)
		return 1
	}
	bins.router, bins.enginesim = filepath.Join(dir, "router"), filepath.Join(dir, "enginesim")
	return m.Run()
}

// findBins sets the paths the Makefile's gie-bins and envtest-bins built,
// failing with the target to run when one is missing.
func findBins() error {
	gie := os.Getenv("SLUICE_GIE_BIN")
	if gie == "" {
		gie = filepath.Join(repoRoot, "bin", "gie")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repoRoot, "bin", "k8s")
	}
	for _, p := range []struct{ path, target string }{
		{filepath.Join(gie, "epp"), "gie-bins"},
		{filepath.Join(gie, "crd", poolCRDFile), "gie-bins"},
		{filepath.Join(assets, "kube-apiserver"), "envtest-bins"},
	} {
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("%s missing: run `make %s` (%w)", p.path, p.target, err)
		}
	}
	var err error
	if bins.picker, err = filepath.Abs(filepath.Join(gie, "epp")); err != nil {
		return err
	}
	if bins.crdDir, err = filepath.Abs(filepath.Join(gie, "crd")); err != nil {
		return err
	}
	bins.assets, err = filepath.Abs(assets)
	return err
}
