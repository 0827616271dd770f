//go:build gie

package gie

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// inNamespaceEnv marks the test process that runs in the test's network
// namespace.
const inNamespaceEnv = "SLUICE_GIE_NETNS"

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

// TestMain runs the tests in a network namespace of their own: the test
// binary runs itself again in a new one, whose loopback interface is
// brought up. The picker binds every interface of the namespace, the
// routers their own loopback addresses (127.0.0.2 and up), and no port
// of the machine is taken.
func TestMain(m *testing.M) {
	if os.Getenv(inNamespaceEnv) == "" {
		os.Exit(inNewNamespace())
	}
	os.Exit(runMain(m))
}

// inNewNamespace runs this test binary again, with the same arguments, in
// a new network namespace, and returns its exit code.
func inNewNamespace() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "gie test: needs root (it runs in a network namespace of its own)")
		return 1
	}
	cmd := exec.CommandContext(context.Background(), "/proc/self/exe", os.Args[1:]...) //nolint:gosec // this binary, again.
	cmd.Env = append(os.Environ(), inNamespaceEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok { //nolint:errorlint // Run returns it unwrapped.
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "gie test: starting it in a new network namespace:", err)
		return 1
	}
	return 0
}

// runMain brings the namespace's loopback interface up, finds the picker
// and the control plane, builds the router and enginesim into a temporary
// directory, runs the tests and removes the directory.
func runMain(m *testing.M) int {
	// envtest logs through controller-runtime's logger; the test reads
	// the processes' output instead.
	logf.SetLogger(logr.Discard())
	if out, err := exec.CommandContext(context.Background(), "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "gie test: bringing lo up: %v: %s\n", err, out)
		return 1
	}
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
