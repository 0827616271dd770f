package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/bench/startlines"
)

// Process bounds.
const (
	// startTimeout bounds how long a process may take to log its listen
	// address; both binaries bind before their first log line but one.
	startTimeout = 15 * time.Second
	// stopGrace is how long a process may take to exit after SIGTERM before
	// its process group is killed. The router is started with a shutdown
	// timeout below it; enginesim's own grace is 10 s but it is idle when
	// stopped.
	stopGrace = 10 * time.Second
)

// errExited reports a process that exited while the demo still needed it.
var errExited = errors.New("exited unexpectedly")

// proc is one child process in its own process group, so that the demo
// (and not the terminal's Ctrl-C) decides when and how it stops.
type proc struct {
	name     string
	logPath  string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when Wait returned
	waitErr  error         // Wait's result, set before exited is closed
	stopping atomic.Bool   // set before the demo stops it
	logFile  *os.File
}

// startProc starts bin with args in a new process group, its stderr (and
// stdout) in logDir/name.log, and waits until match accepts a line of its
// stderr. It fails if the process exits first or startTimeout passes; the
// process is then stopped.
func startProc(ctx context.Context, name, bin string, args []string, logDir string, match func([]byte) bool) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath) //nolint:gosec // the path is the demo's own output directory.
	if err != nil {
		return nil, err
	}
	w := startlines.NewWatcher(f, match)
	// When ctx ends (Ctrl-C, or another process died) the whole group gets
	// SIGTERM at once; exec kills the process stopGrace later if it is
	// still running, and stop does the same for the group.
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // the demo runs the binaries it built, with its own flags.
	cmd.Stdout, cmd.Stderr = f, w
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{}), logFile: f}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-w.Found():
		return p, nil
	case <-p.exited:
		err = fmt.Errorf("%s %w before it listened (%v); see %s", name, errExited, p.waitErr, logPath)
	case <-timer.C:
		err = fmt.Errorf("%s did not log its listen address within %v; see %s", name, startTimeout, logPath)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	p.stop()
	return nil, err
}

// signal sends sig to the process group; errors (the group is gone) are
// ignored.
func (p *proc) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop asks the process group to terminate (SIGTERM), waits up to
// stopGrace, then kills it (SIGKILL) and waits for the exit. It is
// idempotent.
func (p *proc) stop() {
	p.stopping.Store(true)
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

// watch calls fail when the process exits before stop was called.
func (p *proc) watch(fail func(error)) {
	go func() {
		<-p.exited
		if !p.stopping.Load() {
			fail(fmt.Errorf("%s %w (%v); see %s", p.name, errExited, p.waitErr, p.logPath))
		}
	}()
}
