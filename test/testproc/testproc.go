// Package testproc starts the programs a test built as child processes
// (internal/supervise) for the end-to-end, install and monitoring suites:
// it fails the test when one does not start, and stops each one when its
// owner test ends. Eventually is the suites' bounded wait for a
// condition.
package testproc

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/supervise"
)

// Process bounds.
const (
	// StartTimeout bounds how long a process may take to log its start
	// line (a race-instrumented binary starts more slowly).
	StartTimeout = 30 * time.Second
	// StopGrace is how long a process may take to exit after SIGTERM
	// before its process group is killed.
	StopGrace = 15 * time.Second
	// tailBytes is how much of a process's output is kept for failure
	// messages and the data race check: more than a test's process writes.
	tailBytes = 16 << 20
	// raceMarker is what the race detector prints in a process's stderr.
	raceMarker = "WARNING: DATA RACE"
)

// Start starts bin with args and, with match set, waits until match
// accepts a line of its output, failing t otherwise. The process runs until
// the test owner ends (a subtest may start a process the later subtests
// use): it then gets SIGTERM, owner fails if the process reported a data
// race, and owner's failure prints the process's output.
func Start(t, owner testing.TB, name, bin string, args []string, match func([]byte) bool) *supervise.Process {
	t.Helper()
	p, err := supervise.Start(owner.Context(), supervise.Spec{
		Name: name, Path: bin, Args: args, Tail: tailBytes, Ready: match,
		StartTimeout: StartTimeout, StopGrace: StopGrace,
	})
	if err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() {
		p.Stop()
		switch out := p.Tail(); {
		case strings.Contains(out, raceMarker):
			owner.Errorf("%s reported a data race:\n%s", name, out)
		case owner.Failed():
			owner.Logf("output of %s:\n%s", name, out)
		}
	})
	return p
}

// Eventually calls cond every poll until it returns true, and fails the
// test with what and cond's last reason once timeout passed.
func Eventually(t testing.TB, what string, timeout, poll time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not reached within %v: %s", what, timeout, why)
		case <-ticker.C:
		}
	}
}
