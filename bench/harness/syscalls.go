//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// The overhead scenario's system call phase: every proxy process's system
// calls, counted by perf stat from the kernel's syscall tracepoints (no
// ptrace stop per call, unlike strace, so the count does not slow the
// process it counts), while internal/loadgen sends a fixed number of
// requests at a fixed concurrency.
const (
	// syscallWarmupRequests are sent, uncounted, before each count: they
	// open the client's keep-alive connections, so the count holds requests
	// only, not accepts and connection set-up.
	syscallWarmupRequests = 4 * saturationConns
	// syscallRequestTimeout bounds one request of the phase; an instant
	// engine answers in a millisecond.
	syscallRequestTimeout = 30 * time.Second
	// syscallPrompt is the user message, as in the wrk runs' body.
	syscallPrompt = "hi"
	// futexWakeFilter keeps the futex calls that wake waiters:
	// FUTEX_WAKE, FUTEX_WAKE_OP and FUTEX_WAKE_BITSET, private or not
	// (Go's runtime uses FUTEX_WAKE_PRIVATE, 129).
	futexWakeFilter = "op == 1 || op == 129 || op == 5 || op == 133 || op == 10 || op == 138"
)

// Errors of the system call phase.
var (
	// errPerfOutput reports perf stat output without a count the phase
	// needs.
	errPerfOutput = errors.New("harness: unexpected perf stat output")
	// errPerfControl reports a perf stat that did not acknowledge a
	// control command.
	errPerfControl = errors.New("harness: perf stat did not acknowledge")
)

// The kinds of system calls the phase reports.
const (
	kindTotal     = "total"
	kindRead      = "read"
	kindWrite     = "write"
	kindEpoll     = "epoll"
	kindFutex     = "futex"
	kindFutexWake = "futex wake"
)

// syscallEvent is one counted tracepoint and the kind it adds to.
type syscallEvent struct {
	kind, event, filter string
}

// syscallEvents are the counted tracepoints, in perf's output order:
// every system call, then those of each kind; "other" is the total less
// the kinds (futex wakes are a part of futex).
var syscallEvents = []syscallEvent{
	{kind: kindTotal, event: "raw_syscalls:sys_enter"},
	{kind: kindRead, event: "syscalls:sys_enter_read"},
	{kind: kindRead, event: "syscalls:sys_enter_recvfrom"},
	{kind: kindRead, event: "syscalls:sys_enter_readv"},
	{kind: kindWrite, event: "syscalls:sys_enter_write"},
	{kind: kindWrite, event: "syscalls:sys_enter_sendto"},
	{kind: kindWrite, event: "syscalls:sys_enter_writev"},
	{kind: kindEpoll, event: "syscalls:sys_enter_epoll_wait"},
	{kind: kindEpoll, event: "syscalls:sys_enter_epoll_pwait"},
	{kind: kindFutex, event: "syscalls:sys_enter_futex"},
	{kind: kindFutexWake, event: "syscalls:sys_enter_futex", filter: futexWakeFilter},
}

// perfStatArgs are perf stat's arguments: count syscallEvents over every
// thread of pid (and threads it starts), as CSV into out, starting
// disabled; "enable" and "disable" on the ctl FIFO bracket the count and
// are acknowledged on the ack FIFO.
func perfStatArgs(pid int, out, ctl, ack string) []string {
	args := []string{"stat", "-x", ",", "-o", out, "-D", "-1", "--control", "fifo:" + ctl + "," + ack, "-p", strconv.Itoa(pid)}
	for _, e := range syscallEvents {
		args = append(args, "-e", e.event)
		if e.filter != "" {
			args = append(args, "--filter", e.filter)
		}
	}
	return args
}

// perfStatCommand is the perf stat command line as the results quote it,
// with placeholders for the process and the files.
func perfStatCommand() string {
	args := perfStatArgs(0, "OUT", "CTL", "ACK")
	for i, a := range args {
		switch {
		case a == "0" && args[i-1] == "-p":
			args[i] = "PID"
		case strings.ContainsAny(a, " |"):
			args[i] = "'" + a + "'"
		}
	}
	return "perf " + strings.Join(args, " ")
}

// parsePerfStat reads the counts of perf stat -x , output, one per
// syscallEvents entry in order. An event that never ran counts 0 (a
// process that made no system call while counted).
func parsePerfStat(out string) ([]float64, error) {
	var counts []float64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if strings.HasPrefix(sc.Text(), "#") || len(f) < 3 {
			continue // the header, blank lines, "Events enabled"
		}
		i := len(counts)
		if i >= len(syscallEvents) || f[2] != syscallEvents[i].event {
			return nil, fmt.Errorf("%w: line %q where %d events were expected", errPerfOutput, sc.Text(), len(syscallEvents))
		}
		if f[0] == "<not counted>" {
			counts = append(counts, 0)
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%w: count %q of %s", errPerfOutput, f[0], f[2])
		}
		counts = append(counts, v)
	}
	if len(counts) != len(syscallEvents) {
		return nil, fmt.Errorf("%w: %d of %d counts", errPerfOutput, len(counts), len(syscallEvents))
	}
	return counts, nil
}

// syscallCounts are one system's system calls per request by kind.
type syscallCounts struct {
	// Read counts read, recvfrom and readv.
	Read float64 `json:"read"`
	// Write counts write, sendto and writev.
	Write float64 `json:"write"`
	// Epoll counts epoll_wait and epoll_pwait.
	Epoll float64 `json:"epoll"`
	// Futex counts every futex call; FutexWake those that wake a waiter.
	Futex float64 `json:"futex"`
	// FutexWake counts FUTEX_WAKE and its variants, part of Futex.
	FutexWake float64 `json:"futex_wake"`
	// Other is every other system call.
	Other float64 `json:"other"`
	// Total is every system call.
	Total float64 `json:"total"`
}

// perRequest sums counts (parsePerfStat's, in syscallEvents order) by kind
// and divides them by the requests.
func perRequest(counts []float64, requests int) (syscallCounts, error) {
	if len(counts) != len(syscallEvents) || requests <= 0 {
		return syscallCounts{}, fmt.Errorf("%w: %d counts over %d requests", errNoSamples, len(counts), requests)
	}
	by := map[string]float64{}
	for i, e := range syscallEvents {
		by[e.kind] += counts[i]
	}
	n := float64(requests)
	c := syscallCounts{
		Read: by[kindRead] / n, Write: by[kindWrite] / n, Epoll: by[kindEpoll] / n,
		Futex: by[kindFutex] / n, FutexWake: by[kindFutexWake] / n, Total: by[kindTotal] / n,
	}
	c.Other = max(0, c.Total-c.Read-c.Write-c.Epoll-c.Futex)
	return c, nil
}

// syscallRow is one proxy's row of the system call phase.
type syscallRow struct {
	// Name is the overhead table's row.
	Name string `json:"name"`
	// Baseline marks the router built from -baseline.
	Baseline bool `json:"baseline,omitempty"`
	// Requests is what the counted load completed.
	Requests int `json:"requests"`
	// PerRequest is the system calls per request.
	PerRequest syscallCounts `json:"per_request"`
	// AllocsPerRequest is a router's heap allocations per request (the
	// go_memstats_mallocs_total delta, less one /metrics scrape's); nil for
	// the other proxies, or a router without Go metrics.
	AllocsPerRequest *float64 `json:"allocs_per_request,omitempty"`
}

// syscallResult is the system call phase.
type syscallResult struct {
	// Requests and Concurrency are each count's load.
	Requests int `json:"requests"`
	// Concurrency is the load's connections.
	Concurrency int `json:"concurrency"`
	// Command is the perf stat command, with placeholders.
	Command string `json:"command"`
	// Rows has one entry per proxy row of the overhead table.
	Rows []syscallRow `json:"rows"`
}

// countSyscalls runs the system call phase over every system with a
// proxy process, in turn.
func countSyscalls(env *runEnv, systems []*overheadSystem) (*syscallResult, error) {
	res := &syscallResult{Requests: env.opts.syscallRequests, Concurrency: saturationConns, Command: perfStatCommand()}
	for i, s := range systems {
		if s.proc == nil {
			continue
		}
		row, err := measureSyscalls(env, s, fmt.Sprintf("overhead-syscalls-%d", i))
		if err != nil {
			return nil, fmt.Errorf("%s: system calls: %w", s.Name, err)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// measureSyscalls counts one system's system calls (and, for a router,
// allocations) over the phase's requests.
func measureSyscalls(env *runEnv, s *overheadSystem, name string) (syscallRow, error) {
	sup := env.sup
	row := syscallRow{Name: s.Name, Baseline: s.Baseline}
	if s.capacityTier != "" {
		if err := primeCapacity(env, s.router, s.capacityTier); err != nil {
			return row, err
		}
	}
	client := &http.Client{
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2 * saturationConns, DisableCompression: true},
		// loadgen's counts are exact only without redirects.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	cfg := loadgen.Config{BaseURL: s.root, Model: s.model, Prompt: syscallPrompt, NoStream: true, MaxTokens: 1,
		Concurrency: saturationConns, Requests: syscallWarmupRequests, RequestTimeout: syscallRequestTimeout, Client: client}
	r, err := loadgen.Run(sup.ctx, cfg)
	if err != nil {
		return row, err
	}
	if err := checkLoad(name+" warm-up", r); err != nil {
		return row, err
	}
	// Two scrapes before the load: the second one's delta is what a scrape
	// itself allocates, taken off the load's.
	var scrapes [3]float64
	hasAllocs := s.router != nil
	for i := 0; hasAllocs && i < 2; i++ {
		if scrapes[i], hasAllocs, err = s.router.mallocs(sup.ctx); err != nil {
			return row, err
		}
	}
	env.progress("overhead: system calls of %s, %d requests at %d connections", s.Name, env.opts.syscallRequests, saturationConns)
	perf, err := startPerfStat(env, name, s.proc.Pid())
	if err != nil {
		return row, err
	}
	defer perf.stop()
	if err := perf.control("enable"); err != nil {
		return row, err
	}
	cfg.Requests = env.opts.syscallRequests
	r, err = loadgen.Run(sup.ctx, cfg)
	if err != nil {
		return row, err
	}
	if err := perf.control("disable"); err != nil {
		return row, err
	}
	counts, err := perf.finish()
	if err != nil {
		return row, err
	}
	if err := checkLoad(name, r); err != nil {
		return row, err
	}
	row.Requests = r.Succeeded
	if row.PerRequest, err = perRequest(counts, r.Succeeded); err != nil {
		return row, err
	}
	if hasAllocs {
		if scrapes[2], hasAllocs, err = s.router.mallocs(sup.ctx); err != nil {
			return row, err
		}
	}
	if hasAllocs {
		a := allocsPerRequest(scrapes, r.Succeeded)
		row.AllocsPerRequest = &a
	}
	return row, nil
}

// allocsPerRequest is a router's allocations per request from three reads
// of its allocation counter: two before the load, one after. Each read's
// /metrics scrape allocates; the delta between the first two is one
// scrape's, taken off the load's delta.
func allocsPerRequest(mallocs [3]float64, requests int) float64 {
	if requests <= 0 {
		return 0
	}
	scrape := mallocs[1] - mallocs[0]
	return max(0, mallocs[2]-mallocs[1]-scrape) / float64(requests)
}

// perfStat is one running perf stat, controlled through two FIFOs.
type perfStat struct {
	name     string
	cmd      *exec.Cmd
	ctl, ack *os.File
	acks     *bufio.Reader
	// out is the counts' file; fifos the control FIFOs' paths.
	out     string
	fifos   []string
	stderr  bytes.Buffer
	exited  chan struct{}
	waitErr error
}

// startPerfStat starts perf stat on every thread of pid, counting nothing
// until control("enable"); its files are under the run's work directory.
func startPerfStat(env *runEnv, name string, pid int) (*perfStat, error) {
	ctl, ack := env.dir(name+".ctl"), env.dir(name+".ack")
	p := &perfStat{name: name, out: env.dir(name + ".perf"), fifos: []string{ctl, ack}, exited: make(chan struct{})}
	for _, f := range p.fifos {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			p.removeFIFOs()
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	// Opened read-write, a FIFO neither blocks the open nor reads an end of
	// file, whichever side opens it first.
	var err error
	if p.ctl, err = os.OpenFile(ctl, os.O_RDWR, 0); err != nil { //nolint:gosec // a FIFO this function made in the run's work directory.
		p.removeFIFOs()
		return nil, err
	}
	if p.ack, err = os.OpenFile(ack, os.O_RDWR, 0); err != nil { //nolint:gosec // a FIFO this function made in the run's work directory.
		_ = p.ctl.Close()
		p.removeFIFOs()
		return nil, err
	}
	p.acks = bufio.NewReader(p.ack)
	p.cmd = supervise.Command(env.sup.ctx, env.perf, perfStatArgs(pid, p.out, ctl, ack)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stderr, &p.stderr
	if err := p.cmd.Start(); err != nil {
		_, _ = p.ctl.Close(), p.ack.Close()
		p.removeFIFOs()
		return nil, err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// control sends perf one command and waits for its acknowledgement.
func (p *perfStat) control(command string) error {
	if _, err := p.ctl.WriteString(command + "\n"); err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		// perf ends each "ack\n" with a NUL byte, read before the next one.
		line, err := p.acks.ReadString('\n')
		if err == nil && strings.TrimLeft(line, "\x00") != "ack\n" {
			err = fmt.Errorf("%w %s: it answered %q", errPerfControl, command, line)
		}
		got <- err
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case err := <-got:
		return err
	case <-p.exited:
	case <-timer.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	_ = p.ack.Close() // ends the read
	if err := <-got; err == nil {
		return nil // acknowledged as perf ended; finish reports what it wrote
	}
	return fmt.Errorf("%w %s (exit: %v): %s", errPerfControl, command, p.waitErr, tail(p.stderr.String(), 400))
}

// finish stops perf (SIGINT, on which it writes its counts) and parses
// the counts.
func (p *perfStat) finish() ([]float64, error) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		return nil, fmt.Errorf("%s: perf stat did not exit within %v of SIGINT", p.name, stopGrace)
	}
	b, err := os.ReadFile(p.out)
	if err != nil {
		return nil, err
	}
	counts, err := parsePerfStat(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s (exit: %v; %s): %w", p.name, p.waitErr, tail(p.stderr.String(), 400), err)
	}
	return counts, nil
}

// stop kills perf if it still runs and closes and removes the FIFOs; the
// counts' file stays with the run's logs.
func (p *perfStat) stop() {
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	_, _ = p.ctl.Close(), p.ack.Close()
	p.removeFIFOs()
}

// removeFIFOs removes the control FIFOs.
func (p *perfStat) removeFIFOs() {
	for _, f := range p.fifos {
		_ = os.Remove(f)
	}
}

// writeSyscallsMarkdown renders the system call phase's table, with each
// row's CPU per request from the overhead table (rows).
func writeSyscallsMarkdown(b *strings.Builder, sc *syscallResult, rows []overheadRow) {
	fmt.Fprintf(b, "System calls per proxied request, in a phase of their own after the rounds: `perf stat` counts the syscall tracepoints "+
		"of every thread of the proxy's process while internal/loadgen sends %d small non-streaming chat requests at %d connections, "+
		"opened before the count (`%s`). The counts include the process's background work during the phase (a router's pollers). "+
		"Allocations: a router's `go_memstats_mallocs_total` delta over the same phase, less one `/metrics` scrape's, per request. "+
		"CPU per request is the c=32 column above.\n\n", sc.Requests, sc.Concurrency, sc.Command)
	b.WriteString("| system | read, recvfrom, readv | write, sendto, writev | epoll_wait, epoll_pwait | futex (of which wakes) | other | total | allocations | CPU per request (c=32) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	cpu := map[string]float64{}
	for _, r := range rows {
		cpu[r.Name] = r.CPUPerRequestUS
	}
	for _, r := range sc.Rows {
		allocs, us := "—", "—"
		if r.AllocsPerRequest != nil {
			allocs = fmt.Sprintf("%.0f", *r.AllocsPerRequest)
		}
		if v := cpu[r.Name]; v > 0 {
			us = fmt.Sprintf("%.0f µs", v)
		}
		c := r.PerRequest
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %.2f | %.2f (%.2f) | %.2f | %.2f | %s | %s |\n",
			r.Name, c.Read, c.Write, c.Epoll, c.Futex, c.FutexWake, c.Other, c.Total, allocs, us)
	}
	b.WriteString("\n")
}
