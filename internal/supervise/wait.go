package supervise

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// PollInterval is how often Poll checks its condition.
const PollInterval = 20 * time.Millisecond

// dialTimeout bounds one connection attempt of WaitTCP.
const dialTimeout = time.Second

// Poll calls cond every PollInterval until it reports done. A condition
// not met yet says why, or returns an error, which Poll takes as the reason
// and polls on: a process still starting refuses connections. Once timeout
// passed Poll fails with an error wrapping ErrTimeout that names what and
// the last reason; when ctx ends it fails with ctx's cause.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() (done bool, why string, err error)) error {
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	reason := "not checked yet"
	for {
		done, why, err := cond()
		switch {
		case err != nil:
			reason = err.Error()
		case done:
			return nil
		default:
			reason = why
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s not reached within %v: %s", ErrTimeout, what, timeout, reason)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ticker.C:
		}
	}
}

// WaitTCP waits, as Poll does, until addr accepts a TCP connection: the
// readiness of a process that logs no ready line.
func WaitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	return Poll(ctx, timeout, addr+" accepting connections", func() (bool, string, error) {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		var d net.Dialer
		c, err := d.DialContext(dctx, "tcp", addr)
		if err != nil {
			return false, "", err
		}
		_ = c.Close()
		return true, "", nil
	})
}

// Command returns a command for a short-lived child that runs to its end,
// in its own process group; the end of ctx kills the whole group.
func Command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...) //nolint:gosec // the caller's own programs.
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}
