package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/bench/startlines"
)

// Process bounds.
const (
	// startTimeout bounds how long a process may take to log its listen
	// address (a race-instrumented binary starts more slowly).
	startTimeout = 30 * time.Second
	// stopGrace is how long a process may take to exit after SIGTERM
	// before its process group is killed. The router is started with a
	// shorter --shutdown-timeout.
	stopGrace = 15 * time.Second
	// raceMarker is what the race detector prints in a process's stderr.
	raceMarker = "WARNING: DATA RACE"
)

// process is one child process in its own process group, with its stderr
// kept in memory for the test's failure messages.
type process struct {
	name    string
	cmd     *exec.Cmd
	out     *startlines.Log
	exited  chan struct{} // closed when Wait returned
	waitErr error         // Wait's result, set before exited is closed
}

// startProcess starts bin with args in its own process group, stops it
// when the test ends, and waits until match accepts a line of its output.
func startProcess(t *testing.T, name, bin string, args []string, match func([]byte) bool) *process {
	t.Helper()
	out := startlines.NewLog(match)
	// The test's context ends just before its cleanups run: the group then
	// gets SIGTERM, and the cleanup below waits for the exit (killing the
	// group after stopGrace).
	cmd := exec.CommandContext(t.Context(), bin, args...) //nolint:gosec // the tests run the binaries they built.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if strings.Contains(out.String(), raceMarker) {
			t.Errorf("%s reported a data race:\n%s", name, out.String())
		}
	})
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-out.Found():
		return p
	case <-p.exited:
		t.Fatalf("%s exited before it listened (%v):\n%s", name, p.waitErr, out.String())
	case <-timer.C:
		t.Fatalf("%s did not log its address within %v:\n%s", name, startTimeout, out.String())
	}
	return nil
}

// signal sends sig to the process group; an error (the group is gone) is
// ignored.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends SIGTERM, waits up to stopGrace, then kills the process group
// and waits for the exit. It is idempotent.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.signal(syscall.SIGTERM)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.signal(syscall.SIGKILL)
		<-p.exited
	}
}

// kill sends SIGKILL to the process group and waits for the exit.
func (p *process) kill(t *testing.T) {
	t.Helper()
	p.signal(syscall.SIGKILL)
	_ = p.awaitExit(t) // killed: the exit status is the signal's
}

// awaitExit waits for the process to exit and returns Wait's error.
func (p *process) awaitExit(t *testing.T) error {
	t.Helper()
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.waitErr
	case <-timer.C:
		t.Fatalf("%s did not exit within %v:\n%s", p.name, stopGrace, p.out.String())
		return nil
	}
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitCode returns the exit status carried by a Wait error (0 for nil, -1
// when the process did not exit normally).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}
