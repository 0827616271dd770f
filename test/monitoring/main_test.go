package monitoring

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/test/testproc"
)

// Bounds of the processes and waits. They are reached only when a test
// fails.
const (
	// waitTimeout bounds every wait on a process's state.
	waitTimeout = 30 * time.Second
	// pollInterval is how often a wait checks its condition.
	pollInterval = 50 * time.Millisecond
	// httpTimeout bounds one HTTP exchange of the tests.
	httpTimeout = 10 * time.Second
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// bins are the programs TestMain builds: router, enginesim and manager.
var bins map[string]string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain builds the programs into a temporary directory, without the race
// detector (this package checks names, not races; test/e2e and
// test/envtest run them for races), runs the tests and removes the
// directory.
func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-monitoring-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "monitoring:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	pkgs := []string{"router", "enginesim", "manager"}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range pkgs {
		args = append(args, "./cmd/"+p)
	}
	cmd := exec.Command("go", args...) //nolint:gosec,noctx // building the repository's own commands before any test runs.
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "monitoring: building the programs:", err)
		return 1
	}
	bins = map[string]string{}
	for _, p := range pkgs {
		bins[p] = filepath.Join(dir, p)
	}
	return m.Run()
}

// eventually polls cond every pollInterval until it returns true, failing
// the test with cond's last reason after waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testproc.Eventually(t, what, waitTimeout, pollInterval, cond)
}

// freeLoopbackAddr returns a loopback address with a port nobody listens
// on, for the manager: it binds what its flags name and logs the flag, not
// the bound address.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
