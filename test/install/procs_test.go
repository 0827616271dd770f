package install

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/bench/startlines"
)

// Process bounds.
const (
	// startTimeout bounds how long a process may take to log its start line.
	startTimeout = 30 * time.Second
	// stopGrace is how long a process may take to exit after SIGTERM before
	// its process group is killed.
	stopGrace = 15 * time.Second
)

// process is one child process in its own process group, with its output
// kept in memory for the test's failure messages.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    *startlines.Log
	exited chan struct{} // closed when Wait returned
}

// startProcess starts bin with args in its own process group and stops it
// when the test owner ends (printing its output if owner failed): a
// subtest may start a process the later subtests use. With match set, it
// waits until match accepts a line of the output, failing t otherwise;
// without, it returns at once.
func startProcess(t, owner *testing.T, name, bin string, args []string, match func([]byte) bool) *process {
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
	owner.Cleanup(func() {
		p.stop()
		if owner.Failed() {
			owner.Logf("output of %s:\n%s", name, out.String())
		}
	})
	if match == nil {
		return p
	}
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

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, waits up to stopGrace, then
// kills the group and waits for the exit. It is idempotent.
func (p *process) stop() {
	if !p.running() {
		return
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
