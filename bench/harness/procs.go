//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/supervise"
)

// Bounds of process management.
const (
	// stopGrace is how long a stopped process group may take to exit after
	// SIGTERM before it gets SIGKILL; the router's and enginesim's graceful
	// shutdowns finish well within it when idle.
	stopGrace = 5 * time.Second
	// startTimeout bounds the wait for a started process to report that it
	// listens, and every other wait for a condition; a cold start of any
	// of them takes well under a second.
	startTimeout = 20 * time.Second
)

// supervisor starts the processes of a run (internal/supervise), logging
// into one directory, and stops them all when the run ends, fails or is
// interrupted. The death of a process it did not stop cancels its context
// with the process's error.
type supervisor struct {
	// ctx is canceled, with a cause, when a process dies or the run is
	// interrupted; every measurement runs under it, and its end stops
	// every process.
	ctx    context.Context
	cancel context.CancelCauseFunc
	logDir string

	mu sync.Mutex
	// procs are the long-running processes started, in order.
	procs []*supervise.Process
	// toolCPU is the user and system CPU time of the tools runTool ran.
	toolCPU time.Duration
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

// childCPU returns the user and system CPU time of every process started
// by start or runTool that has exited.
func (s *supervisor) childCPU() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.toolCPU
	for _, p := range s.procs {
		total += p.CPUTime()
	}
	return total
}

// start starts bin with args as a long-running process named name (unique
// per run; it names the log file) and, with ready set, waits until ready
// accepts a line of its output.
func (s *supervisor) start(name, bin string, ready func([]byte) bool, args ...string) (*supervise.Process, error) {
	p, err := supervise.Start(s.ctx, supervise.Spec{
		Name: name, Path: bin, Args: args,
		Log:          filepath.Join(s.logDir, name+".log"),
		Ready:        ready,
		StartTimeout: startTimeout,
		StopGrace:    stopGrace,
		Died:         s.cancel,
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// poll waits, as supervise.Poll does, for what under the run's context.
func (s *supervisor) poll(what string, cond func() (bool, error)) error {
	return supervise.Poll(s.ctx, startTimeout, what, func() (bool, string, error) {
		done, err := cond()
		return done, "", err
	})
}

// stopAll stops every process still running, the last started first.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	procs := append([]*supervise.Process(nil), s.procs...)
	s.mu.Unlock()
	stopGroup(procs)
}

// stopGroup stops the given processes, the last first.
func stopGroup(procs []*supervise.Process) {
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
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
	cmd := supervise.Command(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ps := cmd.ProcessState; ps != nil {
		s.mu.Lock()
		s.toolCPU += ps.UserTime() + ps.SystemTime()
		s.mu.Unlock()
	}
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
