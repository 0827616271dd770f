package monitoring

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/bench/startlines"
)

// Bounds of the processes and waits. They are reached only when a test
// fails.
const (
	// startTimeout bounds how long a process may take to log its start line.
	startTimeout = 30 * time.Second
	// stopGrace is how long a process may take to exit after SIGTERM before
	// its process group is killed.
	stopGrace = 15 * time.Second
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

// process is one child process in its own process group, with its output
// kept in memory for the test's failure messages.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    *startlines.Log
	exited chan struct{} // closed when Wait returned
}

// startProcess starts bin with args in its own process group, stops it when
// the test ends (printing its output if the test failed), and waits until
// match accepts a line of its output.
func startProcess(t *testing.T, name, bin string, args []string, match func([]byte) bool) *process {
	t.Helper()
	out := startlines.NewLog(match)
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // the test runs the binaries it built; stop ends the group.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, out.String())
		}
	})
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-out.Found():
		return p
	case <-p.exited:
		t.Fatalf("%s exited before its start line:\n%s", name, out.String())
	case <-timer.C:
		t.Fatalf("%s did not log its start line within %v:\n%s", name, startTimeout, out.String())
	}
	return nil
}

// stop sends SIGTERM to the process group, waits up to stopGrace, then
// kills the group and waits for the exit. It is idempotent.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// eventually polls cond every pollInterval until it returns true, failing
// the test with cond's last reason after waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not reached within %v: %s", what, waitTimeout, why)
		case <-ticker.C:
		}
	}
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
