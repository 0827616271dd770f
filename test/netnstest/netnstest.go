// Package netnstest runs a test binary in a network namespace of its own,
// for the suites that bind loopback addresses beyond 127.0.0.1 or ports a
// machine's other processes may hold: the binary runs itself again in a
// new namespace, whose loopback interface is brought up.
package netnstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// envInside marks the test process that runs in the new namespace.
const envInside = "SLUICE_TEST_NETNS"

// Enter is called first in TestMain. Outside a namespace of its own, it
// runs this test binary again, with the same arguments and environment, in
// a new network namespace, and returns that run's exit code and true: the
// caller exits with the code. Inside, it brings the loopback interface up
// and returns 0 and false: the caller goes on with its tests. who names the
// suite in what it prints; it needs root.
func Enter(who string) (code int, exit bool) {
	if os.Getenv(envInside) == "" {
		return again(who), true
	}
	if out, err := exec.CommandContext(context.Background(), "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: bringing lo up in the network namespace: %v: %s\n", who, err, out)
		return 1, true
	}
	return 0, false
}

// again runs this test binary again in a new network namespace and returns
// its exit code.
func again(who string) int {
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "%s: needs root (it runs in a network namespace of its own)\n", who)
		return 1
	}
	cmd := exec.CommandContext(context.Background(), "/proc/self/exe", os.Args[1:]...) //nolint:gosec // this binary, again.
	cmd.Env = append(os.Environ(), envInside+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok { //nolint:errorlint // Run returns it unwrapped.
			return exit.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "%s: starting it in a new network namespace: %v\n", who, err)
		return 1
	}
	return 0
}
