//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// Bounds of process management.
const (
	// stopGrace is how long a stopped process group may take to exit after
	// SIGTERM before it gets SIGKILL; the router's and enginesim's graceful
	// shutdowns finish well within it when idle.
	stopGrace = 5 * time.Second
	// startTimeout bounds the wait for a started process to report that it
	// listens; a cold start of any of them takes well under a second.
	startTimeout = 20 * time.Second
	// logKeepBytes is how much of a process's output is kept in memory to
	// find its listening line; the rest only goes to its log file.
	logKeepBytes = 64 << 10
	// pollInterval is how often the harness polls a condition it cannot
	// wait on otherwise (a log line, a port, an admin endpoint).
	pollInterval = 20 * time.Millisecond
)

// Errors of process management.
var (
	// errProcessDied reports a process that exited while the harness still
	// needed it.
	errProcessDied = errors.New("harness: process exited unexpectedly")
	// errStartTimeout reports a process that did not become ready in time.
	errStartTimeout = errors.New("harness: process did not become ready")
)

// supervisor starts the processes of a run, each in its own process group,
// and stops them all when the run ends, fails or is interrupted. The death
// of a process it did not stop cancels its context with errProcessDied.
type supervisor struct {
	// ctx is canceled, with a cause, when a process dies or the run is
	// interrupted; every measurement runs under it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	logDir string

	mu    sync.Mutex
	procs []*process
	// childCPU is the user and system CPU time of every process started
	// by start or runTool that has exited.
	childCPU time.Duration
}

// addCPU adds an exited process's CPU time to childCPU.
func (s *supervisor) addCPU(ps *os.ProcessState) {
	if ps == nil {
		return
	}
	s.mu.Lock()
	s.childCPU += ps.UserTime() + ps.SystemTime()
	s.mu.Unlock()
}

// newSupervisor returns a supervisor writing logs to logDir.
func newSupervisor(parent context.Context, logDir string) *supervisor {
	ctx, cancel := context.WithCancelCause(parent)
	return &supervisor{ctx: ctx, cancel: cancel, logDir: logDir}
}

// err returns why the supervisor's context ended, or nil.
func (s *supervisor) err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// process is one started long-running process.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	out     *keepWriter
	done    chan struct{} // closed when the process exited
	exitErr error         // valid after done
	mu      sync.Mutex
	stopped bool // set before the harness stops it
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// keepWriter writes to a file and keeps the first logKeepBytes in memory.
type keepWriter struct {
	mu   sync.Mutex
	file io.Writer
	kept bytes.Buffer
}

// Write implements io.Writer.
func (w *keepWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := logKeepBytes - w.kept.Len(); room > 0 {
		w.kept.Write(b[:min(room, len(b))])
	}
	return w.file.Write(b)
}

// snapshot returns a copy of the kept output.
func (w *keepWriter) snapshot() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.kept.Bytes())
}

// start starts bin with args as a long-running process named name (unique
// per run; it names the log file).
func (s *supervisor) start(name, bin string, args ...string) (*process, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	logPath := filepath.Join(s.logDir, name+".log")
	f, err := os.Create(logPath) //nolint:gosec // a file in the harness's own log directory.
	if err != nil {
		return nil, err
	}
	out := &keepWriter{file: f}
	// The process outlives this call; it is stopped by stop or stopAll.
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // the harness runs the binaries it built or found on PATH.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, out: out, done: make(chan struct{})}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	go func() {
		p.exitErr = cmd.Wait()
		s.addCPU(cmd.ProcessState)
		_ = f.Close()
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		close(p.done)
		if !stopped {
			s.cancel(fmt.Errorf("%w: %s (%v); see %s", errProcessDied, name, exitStatus(p.exitErr), logPath))
		}
	}()
	return p, nil
}

// exitStatus describes a Wait error.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// waitLog waits until the process's output matches re and returns the
// submatches of the first match.
func (s *supervisor) waitLog(p *process, re *regexp.Regexp) ([]string, error) {
	deadline := time.Now().Add(startTimeout)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if m := re.FindSubmatch(p.out.snapshot()); m != nil {
			out := make([]string, len(m))
			for i := range m {
				out[i] = string(m[i])
			}
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s printed no line matching %q within %v; see %s", errStartTimeout, p.name, re, startTimeout, p.logPath)
		}
		select {
		case <-s.ctx.Done():
			return nil, s.err()
		case <-t.C:
		}
	}
}

// waitTCP waits until addr accepts a connection.
func (s *supervisor) waitTCP(name, addr string) error {
	return s.poll(name+" accepting connections on "+addr, func() (bool, error) {
		var d net.Dialer
		ctx, cancel := context.WithTimeout(s.ctx, time.Second)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, nil
		}
		return true, c.Close()
	})
}

// poll calls cond every pollInterval until it returns true or an error,
// the start timeout passes, or the run ends.
func (s *supervisor) poll(what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(startTimeout)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s within %v", errStartTimeout, what, startTimeout)
		}
		select {
		case <-s.ctx.Done():
			return s.err()
		case <-t.C:
		}
	}
}

// stop stops the process's group: SIGTERM, then SIGKILL after stopGrace.
// It returns once the process exited.
func (s *supervisor) stop(p *process) {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children the process left in its group, if any, go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// stopAll stops every process still running, the last started first.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := append([]*process(nil), s.procs...)
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		s.stop(procs[i])
	}
}

// stopGroup stops the given processes, the last first, and forgets them.
func (s *supervisor) stopGroup(procs []*process) {
	for i := len(procs) - 1; i >= 0; i-- {
		s.stop(procs[i])
	}
	s.mu.Lock()
	kept := s.procs[:0]
	for _, p := range s.procs {
		select {
		case <-p.done:
		default:
			kept = append(kept, p)
		}
	}
	s.procs = kept
	s.mu.Unlock()
}

// runTool runs a short-lived tool in its own process group under the run's
// context and returns its standard output. Its combined output also goes to
// a log file; a non-zero exit is an error quoting the output's end.
func (s *supervisor) runTool(ctx context.Context, name, bin string, args ...string) (string, error) {
	return s.runToolIn(ctx, "", name, bin, args...)
}

// runToolIn is runTool in the working directory dir ("" for the
// harness's own).
func (s *supervisor) runToolIn(ctx context.Context, dir, name, bin string, args ...string) (string, error) {
	if err := s.err(); err != nil {
		return "", err
	}
	logPath := filepath.Join(s.logDir, name+".log")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // the harness runs tools it found on PATH.
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	s.addCPU(cmd.ProcessState)
	_ = os.WriteFile(logPath, append(append(stdout.Bytes(), "\n--- stderr ---\n"...), stderr.Bytes()...), 0o600)
	if cause := s.err(); cause != nil {
		return "", cause
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s; see %s", name, err, tail(stderr.String()+stdout.String(), 400), logPath)
	}
	return stdout.String(), nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// freeLoopbackAddr returns a loopback address with a port that was free a
// moment ago, for a process (HAProxy) that cannot report the port it bound.
func freeLoopbackAddr(ctx context.Context) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
