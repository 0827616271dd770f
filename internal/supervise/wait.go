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

// Poll calls cond every PollInterval until it returns true or an error. It
// fails with an error wrapping ErrTimeout once timeout passed, and with
// ctx's cause when ctx ends.
func Poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v", ErrTimeout, timeout)
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
	return Poll(ctx, timeout, func() (bool, error) {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		var d net.Dialer
		c, err := d.DialContext(dctx, "tcp", addr)
		if err != nil {
			return false, nil
		}
		return true, c.Close()
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
