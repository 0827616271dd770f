package install

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
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
	out    *logBuffer
	exited chan struct{} // closed when Wait returned
}

// logBuffer keeps a process's output and hands each complete line to the
// matcher until it accepts one.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	match   func(line []byte) bool
	found   chan struct{}
}

// Write implements io.Writer.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.match == nil {
		return len(p), nil
	}
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := b.partial[:i]
		b.partial = b.partial[i+1:]
		if b.match(line) {
			b.match, b.partial = nil, nil
			close(b.found)
			return len(p), nil
		}
	}
}

// String returns everything the process wrote so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess starts bin with args in its own process group and stops it
// when the test owner ends (printing its output if owner failed): a
// subtest may start a process the later subtests use. With match set, it
// waits until match accepts a line of the output, failing t otherwise;
// without, it returns at once.
func startProcess(t, owner *testing.T, name, bin string, args []string, match func([]byte) bool) *process {
	t.Helper()
	out := &logBuffer{match: match, found: make(chan struct{})}
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
	case <-out.found:
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
