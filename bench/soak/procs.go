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
	// its process group is killed; above the router's shutdown timeout.
	stopGrace = 10 * time.Second
	// killWait bounds the wait for a SIGKILLed process to be reaped.
	killWait = 5 * time.Second
)

// Process errors.
var (
	// errExited reports a process that exited while the soak needed it.
	errExited = errors.New("soak: process exited unexpectedly")
	// errStartTimeout reports a process that did not log its address in time.
	errStartTimeout = errors.New("soak: process did not log its listen address in time")
	// errKillTimeout reports a killed process that was not reaped in time.
	errKillTimeout = errors.New("soak: killed process not reaped in time")
)

// proc is one child process in its own process group.
type proc struct {
	name     string
	logPath  string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when Wait returned
	waitErr  error         // Wait's result, set before exited is closed
	stopping atomic.Bool   // set before the soak stops or kills it
}

// startProc starts bin with args in a new process group, its output
// appended to logDir/name.log, and waits until match accepts a line. It
// fails if the process exits first or startTimeout passes; the process is
// then stopped.
func startProc(ctx context.Context, name, bin string, args []string, logDir string, match func([]byte) bool) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600) //nolint:gosec // the soak's own output directory.
	if err != nil {
		return nil, err
	}
	w := startlines.NewWatcher(f, match)
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // the soak runs the binaries it built; it stops them itself.
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
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
		err = fmt.Errorf("%s: %w before it listened (%v); see %s", name, errExited, p.waitErr, logPath)
	case <-timer.C:
		err = fmt.Errorf("%s: %w; see %s", name, errStartTimeout, logPath)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	p.stop()
	return nil, err
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process group; errors (the group is gone) are
// ignored.
func (p *proc) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill sends SIGKILL and waits, bounded, until the process is reaped.
func (p *proc) kill() error {
	p.stopping.Store(true)
	p.signal(syscall.SIGKILL)
	timer := time.NewTimer(killWait)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
		return fmt.Errorf("%s: %w", p.name, errKillTimeout)
	}
}

// stop asks the process group to terminate (SIGTERM), waits up to
// stopGrace, then kills it and waits for the exit. It is idempotent.
func (p *proc) stop() {
	p.stopping.Store(true)
	if !p.running() {
		return
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

// unexpectedExit returns an error when the process exited without the soak
// stopping or killing it, and nil otherwise.
func (p *proc) unexpectedExit() error {
	if p.running() || p.stopping.Load() {
		return nil
	}
	return fmt.Errorf("%s: %w (%v); see %s", p.name, errExited, p.waitErr, p.logPath)
}
