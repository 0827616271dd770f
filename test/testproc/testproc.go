// Package testproc starts the programs a test built as child processes in
// their own process groups, waits for their start line and stops them when
// the test ends, for the install and monitoring suites.
package testproc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/bench/startlines"
)

// Process bounds.
const (
	// StartTimeout bounds how long a process may take to log its start
	// line.
	StartTimeout = 30 * time.Second
	// StopGrace is how long a process may take to exit after SIGTERM
	// before its process group is killed.
	StopGrace = 15 * time.Second
)

// Process is one child process in its own process group, with its output
// kept in memory for the test's failure messages.
type Process struct {
	name   string
	cmd    *exec.Cmd
	out    *startlines.Log
	exited chan struct{} // closed when Wait returned
}

// Start starts bin with args in its own process group and stops it when
// the test owner ends (printing its output if owner failed): a subtest may
// start a process the later subtests use. With match set, it waits until
// match accepts a line of the output, failing t otherwise; without, it
// returns at once.
func Start(t, owner *testing.T, name, bin string, args []string, match func([]byte) bool) *Process {
	t.Helper()
	out := startlines.NewLog(match)
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // the test runs the binaries it built; Stop ends the group.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}
	p := &Process{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	owner.Cleanup(func() {
		p.Stop()
		if owner.Failed() {
			owner.Logf("output of %s:\n%s", name, out.String())
		}
	})
	if match == nil {
		return p
	}
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case <-out.Found():
		return p
	case <-p.exited:
		t.Fatalf("%s exited before its start line:\n%s", name, out.String())
	case <-timer.C:
		t.Fatalf("%s did not log its start line within %v:\n%s", name, StartTimeout, out.String())
	}
	return nil
}

// Name returns the name the process was started with.
func (p *Process) Name() string { return p.name }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM to the process group, waits up to StopGrace, then
// kills the group and waits for the exit. It is idempotent.
func (p *Process) Stop() {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	timer := time.NewTimer(StopGrace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}
