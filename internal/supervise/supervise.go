// Package supervise runs the child processes of the demo, the chaos soak,
// the benchmark harness and the multi-process tests. Each child runs in its
// own process group (so a terminal's Ctrl-C reaches only its parent, which
// decides when and how the child stops) with its output going to a log
// file, to a bounded tail kept in memory, or both. Start waits until the
// child logs its ready line; the package reports a child that exits
// unexpectedly, stops a child with SIGTERM and then SIGKILL to its whole
// group, and stops every child of a context when the context ends. It
// imports only the standard library.
package supervise

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds.
const (
	// DefaultStartTimeout bounds the wait for the ready line when
	// Spec.StartTimeout is zero.
	DefaultStartTimeout = 30 * time.Second
	// DefaultStopGrace is how long a process may take to exit after
	// SIGTERM before its group is killed, when Spec.StopGrace is zero.
	DefaultStopGrace = 10 * time.Second
	// KillWait bounds Kill's wait for the killed process to be reaped.
	KillWait = 5 * time.Second
	// drainWait bounds the wait for the end of the output once the group
	// was killed: only a process that left the group can still hold it.
	drainWait = time.Second
)

// Errors.
var (
	// ErrExited reports a process that exited without being stopped.
	ErrExited = errors.New("exited unexpectedly")
	// ErrTimeout reports a wait that did not end in time.
	ErrTimeout = errors.New("timed out")
)

// Spec describes a process to start.
type Spec struct {
	// Name names the process in errors.
	Name string
	// Path is the program.
	Path string
	// Args are the program's arguments.
	Args []string
	// Log, when set, is the file the standard output and error are
	// appended to.
	Log string
	// Tail, when positive, is how many of the last bytes of the output
	// are kept in memory, for Tail and for errors.
	Tail int
	// Ready, when set, is handed each line of the output until it accepts
	// one; Start returns once it did.
	Ready func(line []byte) bool
	// StartTimeout bounds the wait for the ready line
	// (DefaultStartTimeout when zero).
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before it kills the
	// group (DefaultStopGrace when zero).
	StopGrace time.Duration
	// Died, when set, is called once, on a goroutine of its own, with an
	// error wrapping ErrExited, when the process exits without Stop or
	// Kill having been called.
	Died func(error)
}

// Process is one started child process, the leader of its own process
// group.
type Process struct {
	spec     Spec
	cmd      *exec.Cmd
	out      *output
	exited   chan struct{} // closed once the process was reaped and its output ended
	exitErr  error         // Wait's result, set before exited is closed
	stopping atomic.Bool   // set before Stop or Kill signals the group
}

// Start starts the process of s in its own process group and, when
// s.Ready is set, waits until s.Ready accepted a line of its output. It
// fails, having stopped the process, when the process exits first,
// s.StartTimeout passes or ctx ends. The end of ctx stops the process.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	out, err := newOutput(&s)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		out.close()
		return nil, err
	}
	cmd := exec.Command(s.Path, s.Args...) //nolint:gosec,noctx // the caller's own programs; ctx's end stops the group below.
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		out.close()
		return nil, fmt.Errorf("%s: start: %w", s.Name, err)
	}
	p := &Process{spec: s, cmd: cmd, out: out, exited: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		out.copyFrom(r)
		close(copied)
	}()
	go p.wait(r, copied)
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.exited:
		}
	}()
	if s.Ready == nil {
		return p, nil
	}
	if err := p.awaitReady(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// wait reaps the process, kills what is left of its group, waits for the
// end of the output and reports an unexpected exit.
func (p *Process) wait(r *os.File, copied <-chan struct{}) {
	err := p.cmd.Wait()
	_ = p.Signal(syscall.SIGKILL)
	timer := time.NewTimer(drainWait)
	select {
	case <-copied:
	case <-timer.C: // a process that left the group holds the output open
	}
	timer.Stop()
	_ = r.Close()
	<-copied
	p.out.close()
	p.exitErr = err
	close(p.exited)
	if p.spec.Died != nil && !p.stopping.Load() {
		p.spec.Died(p.unexpected())
	}
}

// awaitReady waits until the ready line was seen.
func (p *Process) awaitReady(ctx context.Context) error {
	limit := cmp.Or(p.spec.StartTimeout, DefaultStartTimeout)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-p.out.ready:
		return nil
	case <-p.exited:
		if p.out.isReady() {
			return nil
		}
		return p.errorf("%w before its ready line (%v)", ErrExited, p.cmd.ProcessState)
	case <-timer.C:
		return p.errorf("%w: no ready line within %v", ErrTimeout, limit)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// errorf returns an error about the process, naming its log file and
// quoting its kept output.
func (p *Process) errorf(format string, args ...any) error {
	err := fmt.Errorf("%s: %w", p.spec.Name, fmt.Errorf(format, args...))
	if p.spec.Log != "" {
		err = fmt.Errorf("%w; see %s", err, p.spec.Log)
	}
	if p.spec.Tail > 0 {
		err = fmt.Errorf("%w; output:\n%s", err, p.out.String())
	}
	return err
}

// unexpected describes an exit nobody asked for.
func (p *Process) unexpected() error {
	return p.errorf("%w (%v)", ErrExited, p.cmd.ProcessState)
}

// Name returns the name the process was started with.
func (p *Process) Name() string { return p.spec.Name }

// Pid returns the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Tail returns the kept end of the output.
func (p *Process) Tail() string { return p.out.String() }

// Exited is closed once the process exited and its output ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr returns how the process exited once Exited is closed: nil for
// exit status 0, an *exec.ExitError otherwise.
func (p *Process) ExitErr() error { return p.exitErr }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// UnexpectedExit returns an error wrapping ErrExited when the process
// exited without Stop or Kill having been called, and nil otherwise.
func (p *Process) UnexpectedExit() error {
	if p.Running() || p.stopping.Load() {
		return nil
	}
	return p.unexpected()
}

// CPUTime returns the user and system CPU time of the exited process (zero
// while it runs).
func (p *Process) CPUTime() time.Duration {
	if p.Running() {
		return 0
	}
	ps := p.cmd.ProcessState
	return ps.UserTime() + ps.SystemTime()
}

// Signal sends sig to the process group; an error means the group is gone.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop sends SIGTERM to the process group, waits up to the stop grace,
// then kills the group and waits for the exit. It is idempotent and safe to
// call concurrently.
func (p *Process) Stop() {
	p.stopping.Store(true)
	if !p.Running() {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	timer := time.NewTimer(cmp.Or(p.spec.StopGrace, DefaultStopGrace))
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = p.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// Kill sends SIGKILL to the process group and waits, at most KillWait,
// until the process was reaped.
func (p *Process) Kill() error {
	p.stopping.Store(true)
	_ = p.Signal(syscall.SIGKILL)
	timer := time.NewTimer(KillWait)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
		return p.errorf("%w: not reaped within %v of SIGKILL", ErrTimeout, KillWait)
	}
}
