package supervise

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv selects the helper behaviour when the test binary runs as a
// child of the tests.
const helperEnv = "SUPERVISE_TEST_HELPER"

// Test bounds: reached only when a test fails.
const (
	waitBound = 10 * time.Second
	// helperLife caps how long a helper child runs, so that none outlives
	// a failed test by more than that.
	helperLife = time.Minute
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helper(mode)
		return
	}
	os.Exit(m.Run())
}

// helper is the child process: it logs lines and behaves as mode says
// ("parent" starts a "deaf" child, which ignores SIGTERM).
func helper(mode string) {
	fmt.Printf("booting pid=%d\n", os.Getpid())
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "failing")
		os.Exit(3)
	case "silent":
	case "deaf":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("deaf")
	case "ready":
		fmt.Println("ready")
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
	case "parent":
		// The child shares the output (stderr) and says on stdout when
		// it ignores SIGTERM.
		child := helperCmd("deaf")
		child.Stderr = os.Stderr
		out, err := child.StdoutPipe()
		if err == nil {
			err = child.Start()
		}
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "deaf" {
		}
		fmt.Printf("ready child=%d\n", child.Process.Pid)
	}
	<-time.After(helperLife)
}

// helperCmd is the test binary as a helper child in mode.
func helperCmd(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0]) //nolint:gosec,noctx // the test binary itself, bounded by helperLife.
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

// helperSpec is a Spec starting the test binary as a helper in mode.
func helperSpec(t *testing.T, mode string) Spec {
	t.Setenv(helperEnv, mode)
	return Spec{Name: "helper-" + mode, Path: os.Args[0], Tail: 4 << 10}
}

// start starts s and stops it when the test ends.
func start(t *testing.T, ctx context.Context, s Spec) *Process {
	t.Helper()
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// readyLine is a matcher accepting the line with prefix "ready" and
// storing it in *got.
func readyLine(got *string) func([]byte) bool {
	return func(line []byte) bool {
		if !bytes.HasPrefix(line, []byte("ready")) {
			return false
		}
		*got = string(line)
		return true
	}
}

// awaitExit fails t unless p exits within waitBound.
func awaitExit(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(waitBound):
		t.Fatalf("%s still running after %v", p.Name(), waitBound)
	}
}

// exitSignal returns the signal that ended p, or 0.
func exitSignal(p *Process) syscall.Signal {
	var ee *exec.ExitError
	if !errors.As(p.ExitErr(), &ee) {
		return 0
	}
	return ee.Sys().(syscall.WaitStatus).Signal()
}

// awaitGone fails t unless process pid is gone (or a zombie) within
// waitBound.
func awaitGone(t *testing.T, pid int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	err := Poll(t.Context(), waitBound, "process gone", func() (bool, string, error) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true, "", nil
		}
		// The state follows the parenthesised command name.
		i := bytes.LastIndexByte(b, ')')
		return i > 0 && len(b) > i+2 && b[i+2] == 'Z', "still running", nil
	})
	if err != nil {
		t.Fatalf("process %d still runs: %v", pid, err)
	}
}

// TestStartWaitsForTheReadyLine: Start returns once the matcher accepted
// a line; the output goes to the log file and the tail.
func TestStartWaitsForTheReadyLine(t *testing.T) {
	s := helperSpec(t, "ready")
	s.Log = filepath.Join(t.TempDir(), "helper.log")
	var got string
	s.Ready = readyLine(&got)
	p := start(t, t.Context(), s)
	if got != "ready" || !p.Running() {
		t.Fatalf("matched %q, running %v", got, p.Running())
	}
	p.Stop()
	if p.Running() || p.UnexpectedExit() != nil {
		t.Fatalf("after Stop: running %v, unexpected exit %v", p.Running(), p.UnexpectedExit())
	}
	want := fmt.Sprintf("booting pid=%d\nready\n", p.Pid())
	if log, err := os.ReadFile(s.Log); err != nil || string(log) != want {
		t.Fatalf("log %q (%v), want %q", log, err, want)
	}
	if p.Tail() != want {
		t.Fatalf("tail %q, want %q", p.Tail(), want)
	}
}

// TestStartTimesOutWithoutTheReadyLine: a process that never logs its
// ready line fails Start after StartTimeout and is stopped.
func TestStartTimesOutWithoutTheReadyLine(t *testing.T) {
	s := helperSpec(t, "silent")
	s.Log = filepath.Join(t.TempDir(), "helper.log")
	s.Ready = readyLine(new(string))
	// Long enough for the helper to print its first line on a loaded
	// machine: the error must quote it.
	s.StartTimeout = 3 * time.Second
	_, err := Start(t.Context(), s)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), s.Log) || !strings.Contains(err.Error(), "booting") {
		t.Fatalf("err %v, want ErrTimeout naming the log and quoting the output", err)
	}
	log, err := os.ReadFile(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(string(log), "booting pid=%d", &pid); err != nil {
		t.Fatalf("log %q: %v", log, err)
	}
	awaitGone(t, pid)
}

// TestStartFailsWhenTheProcessExits: a process that exits before its
// ready line fails Start with its exit status.
func TestStartFailsWhenTheProcessExits(t *testing.T) {
	s := helperSpec(t, "exit")
	s.Ready = readyLine(new(string))
	_, err := Start(t.Context(), s)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "failing") {
		t.Fatalf("err %v, want ErrExited with the status and the output", err)
	}
}

// TestDiedReportsAnUnexpectedExit: an exit nobody asked for reaches Died
// and UnexpectedExit; the exit status and CPU time are kept.
func TestDiedReportsAnUnexpectedExit(t *testing.T) {
	s := helperSpec(t, "exit")
	died := make(chan error, 1)
	s.Died = func(err error) { died <- err }
	p := start(t, t.Context(), s)
	select {
	case err := <-died:
		if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
			t.Fatalf("Died got %v", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Died not called")
	}
	var ee *exec.ExitError
	if !errors.As(p.ExitErr(), &ee) || ee.ExitCode() != 3 {
		t.Fatalf("ExitErr %v, want exit status 3", p.ExitErr())
	}
	if !errors.Is(p.UnexpectedExit(), ErrExited) {
		t.Fatalf("UnexpectedExit %v", p.UnexpectedExit())
	}
	if cpu := p.CPUTime(); cpu != ee.UserTime()+ee.SystemTime() {
		t.Fatalf("CPUTime %v, ProcessState says %v", cpu, ee.UserTime()+ee.SystemTime())
	}
}

// TestStopTerminates: a process that honours SIGTERM exits by it, well
// before the grace, and Died is not called.
func TestStopTerminates(t *testing.T) {
	s := helperSpec(t, "ready")
	s.Ready = readyLine(new(string))
	s.Died = func(err error) { t.Errorf("Died called: %v", err) }
	p := start(t, t.Context(), s)
	p.Stop()
	if sig := exitSignal(p); sig != syscall.SIGTERM {
		t.Fatalf("ended by %v (%v), want SIGTERM", sig, p.ExitErr())
	}
}

// TestStopEscalatesToSIGKILL: a process that ignores SIGTERM is killed
// once the grace passed.
func TestStopEscalatesToSIGKILL(t *testing.T) {
	s := helperSpec(t, "stubborn")
	s.Ready = readyLine(new(string))
	s.StopGrace = 300 * time.Millisecond
	p := start(t, t.Context(), s)
	began := time.Now()
	p.Stop()
	if sig := exitSignal(p); sig != syscall.SIGKILL {
		t.Fatalf("ended by %v (%v), want SIGKILL", sig, p.ExitErr())
	}
	if took := time.Since(began); took < s.StopGrace {
		t.Fatalf("killed after %v, before the grace of %v", took, s.StopGrace)
	}
}

// TestStopKillsTheGroup: stopping a process also ends the child it
// started, which shares its process group and output and ignores SIGTERM:
// no process of the group outlives its leader.
func TestStopKillsTheGroup(t *testing.T) {
	s := helperSpec(t, "parent")
	var line string
	s.Ready = readyLine(&line)
	p := start(t, t.Context(), s)
	var child int
	if _, err := fmt.Sscanf(line, "ready child=%d", &child); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	p.Stop()
	awaitGone(t, child)
}

// TestKillKillsTheGroup: Kill ends the process and its child at once.
func TestKillKillsTheGroup(t *testing.T) {
	s := helperSpec(t, "parent")
	var line string
	s.Ready = readyLine(&line)
	s.Died = func(err error) { t.Errorf("Died called: %v", err) }
	p := start(t, t.Context(), s)
	var child int
	if _, err := fmt.Sscanf(line, "ready child=%d", &child); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if sig := exitSignal(p); sig != syscall.SIGKILL {
		t.Fatalf("ended by %v, want SIGKILL", sig)
	}
	awaitGone(t, child)
}

// TestContextEndStopsTheProcess: the end of Start's context stops the
// process, which is then no unexpected exit.
func TestContextEndStopsTheProcess(t *testing.T) {
	s := helperSpec(t, "ready")
	s.Ready = readyLine(new(string))
	s.Died = func(err error) { t.Errorf("Died called: %v", err) }
	ctx, cancel := context.WithCancel(t.Context())
	p := start(t, ctx, s)
	cancel()
	awaitExit(t, p)
	if sig := exitSignal(p); sig != syscall.SIGTERM || p.UnexpectedExit() != nil {
		t.Fatalf("ended by %v, unexpected exit %v", sig, p.UnexpectedExit())
	}
}

// TestStartAfterTheContextEnded starts nothing.
func TestStartAfterTheContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("run over")
	cancel(cause)
	if _, err := Start(ctx, helperSpec(t, "ready")); !errors.Is(err, cause) {
		t.Fatalf("err %v, want the context's cause", err)
	}
}

// TestCommandKillsTheGroupOnCancel: the end of a Command's context kills
// its whole group.
func TestCommandKillsTheGroupOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cmd := Command(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=parent")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	child := 0
	for child == 0 && sc.Scan() {
		_, _ = fmt.Sscanf(sc.Text(), "ready child=%d", &child)
	}
	if child == 0 {
		t.Fatalf("no ready line: %v", sc.Err())
	}
	cancel()
	if err := cmd.Wait(); err == nil {
		t.Fatal("canceled command exited cleanly")
	}
	awaitGone(t, child)
}

// TestOutputTailAndLines: the tail keeps the last bytes; a ready line split
// across writes is matched once, and an overlong partial line is dropped.
func TestOutputTailAndLines(t *testing.T) {
	var seen []string
	o, err := newOutput(&Spec{Tail: 8, Ready: func(line []byte) bool {
		seen = append(seen, string(line))
		return bytes.HasPrefix(line, []byte("addr="))
	}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", maxLine+1)
	for _, chunk := range []string{long, "first\nad", "dr=:9", "\nlater\n"} {
		o.write([]byte(chunk))
		if len(o.line) > maxLine {
			t.Fatalf("kept a partial line of %d bytes", len(o.line))
		}
	}
	if !o.isReady() || strings.Join(seen, "|") != "first|addr=:9" {
		t.Fatalf("ready %v, matcher saw %q", o.isReady(), seen)
	}
	if o.String() != "9\nlater\n" {
		t.Fatalf("tail %q", o.String())
	}
}

// TestPoll: a condition met, errors and reasons polled on, the timeout
// naming the last reason, and the context's end.
func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(t.Context(), waitBound, "three calls", func() (bool, string, error) { n++; return n == 3, "", nil }); err != nil || n != 3 {
		t.Fatalf("met after %d calls: %v", n, err)
	}
	n = 0
	err := Poll(t.Context(), waitBound, "an answer", func() (bool, string, error) {
		if n++; n < 3 {
			return false, "", errors.New("connection refused")
		}
		return true, "", nil
	})
	if err != nil || n != 3 {
		t.Fatalf("an error is polled on: %v after %d calls", err, n)
	}
	err = Poll(t.Context(), 50*time.Millisecond, "thing", func() (bool, string, error) { return false, "still waiting", nil })
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "thing not reached within 50ms: still waiting") {
		t.Fatalf("err %v, want ErrTimeout with the last reason", err)
	}
	err = Poll(t.Context(), 50*time.Millisecond, "thing", func() (bool, string, error) { return false, "", errors.New("boom") })
	if !errors.Is(err, ErrTimeout) || !strings.HasSuffix(err.Error(), ": boom") {
		t.Fatalf("err %v, want ErrTimeout with the last error", err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")
	cancel(cause)
	if err := Poll(ctx, waitBound, "thing", func() (bool, string, error) { return false, "", nil }); !errors.Is(err, cause) {
		t.Fatalf("err %v, want the context's cause", err)
	}
}

// TestWaitTCP: a listening address is ready, a closed one times out.
func TestWaitTCP(t *testing.T) {
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := WaitTCP(t.Context(), addr, waitBound); err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := WaitTCP(t.Context(), addr, 100*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("closed port: %v, want ErrTimeout", err)
	}
}
