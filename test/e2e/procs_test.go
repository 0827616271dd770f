package e2e

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/testproc"
)

// awaitExit waits for the process to exit and returns how it exited.
func awaitExit(t *testing.T, p *supervise.Process) error {
	t.Helper()
	select {
	case <-p.Exited():
		return p.ExitErr()
	case <-time.After(testproc.StopGrace):
		t.Fatalf("%s did not exit within %v:\n%s", p.Name(), testproc.StopGrace, p.Tail())
		return nil
	}
}

// exitCode returns the exit status carried by a Wait error (0 for nil, -1
// when the process did not exit normally).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}
