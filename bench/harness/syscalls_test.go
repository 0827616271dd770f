//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPerfStatArgs(t *testing.T) {
	args := perfStatArgs(42, "/w/o.perf", "/w/o.ctl", "/w/o.ack")
	line := strings.Join(args, " ")
	for _, s := range []string{"stat -x , -o /w/o.perf -D -1 --control fifo:/w/o.ctl,/w/o.ack -p 42 ",
		"-e syscalls:sys_enter_futex -e syscalls:sys_enter_futex --filter " + futexWakeFilter} {
		if !strings.Contains(line, s) {
			t.Errorf("perf args %q lack %q", line, s)
		}
	}
	// One -e per event, in syscallEvents order, which parsePerfStat relies
	// on; a filter follows the event it applies to.
	var events []string
	for i, a := range args {
		if a == "-e" {
			events = append(events, args[i+1])
		}
	}
	if len(events) != len(syscallEvents) {
		t.Fatalf("events = %v", events)
	}
	for i, e := range syscallEvents {
		if events[i] != e.event {
			t.Fatalf("event %d = %s, want %s", i, events[i], e.event)
		}
	}
	if got := perfStatCommand(); !strings.Contains(got, "-p PID -e") || !strings.Contains(got, "--filter '"+futexWakeFilter+"'") {
		t.Fatalf("quoted command = %s", got)
	}
}

// perfOutput renders perf stat -x , output with the given counts, one per
// syscallEvents entry, framed as perf frames it with --control.
func perfOutput(counts ...string) string {
	var b strings.Builder
	b.WriteString("# started on Sun Dec  6 09:41:52 2026\n\nEvents disabled\nEvents enabled\n")
	for i, c := range counts {
		fmt.Fprintf(&b, "%s,,%s,220234116,100.00,,\n", c, syscallEvents[i%len(syscallEvents)].event)
	}
	b.WriteString("Events disabled\n")
	return b.String()
}

func TestParsePerfStat(t *testing.T) {
	// 1000 requests: 9784 calls, 4873+988 reads, 2000 writes, 340 epoll,
	// 371 futex of which 184 wakes; the process made no readv.
	out := perfOutput("9784", "4873", "988", "<not counted>", "2000", "0", "0", "0", "340", "371", "184")
	counts, err := parsePerfStat(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := perRequest(counts, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := syscallCounts{Read: 5.861, Write: 2, Epoll: 0.34, Futex: 0.371, FutexWake: 0.184, Other: 9.784 - 5.861 - 2 - 0.34 - 0.371, Total: 9.784}
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"read", c.Read, want.Read}, {"write", c.Write, want.Write}, {"epoll", c.Epoll, want.Epoll}, {"futex", c.Futex, want.Futex},
		{"futex wake", c.FutexWake, want.FutexWake}, {"other", c.Other, want.Other}, {"total", c.Total, want.Total}} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}

	ten := []string{"1", "1", "1", "1", "1", "1", "1", "1", "1", "1"}
	for name, bad := range map[string]string{
		"a count missing":     perfOutput(ten...),
		"a count too many":    perfOutput(append(ten, "1", "1")...),
		"unsupported":         perfOutput(append(ten[:9], "<not supported>", "1")...),
		"events out of order": strings.Replace(perfOutput(append(ten, "1")...), "sys_enter_read,", "sys_enter_write,", 1),
	} {
		if _, err := parsePerfStat(bad); !errors.Is(err, errPerfOutput) {
			t.Errorf("%s: err = %v, want errPerfOutput", name, err)
		}
	}
	if _, err := perRequest(counts, 0); !errors.Is(err, errNoSamples) {
		t.Errorf("no requests: err = %v", err)
	}
}

func TestAllocsPerRequest(t *testing.T) {
	// A scrape allocates 500; the load 60 000 over 1000 requests.
	if got := allocsPerRequest([3]float64{10_000, 10_500, 71_000}, 1000); got != 60 {
		t.Fatalf("allocs per request = %v, want 60", got)
	}
	if got := allocsPerRequest([3]float64{0, 500, 600}, 1000); got != 0 {
		t.Fatalf("a load that allocated less than a scrape = %v, want 0", got)
	}
}

// fakePerf is a stand-in for perf stat's control protocol: it acknowledges
// every command on the ack FIFO as perf does ("ack\n" and a NUL byte),
// and on SIGINT writes the output file and exits.
const fakePerf = `#!/bin/bash
while [ $# -gt 0 ]; do
	case "$1" in
	-o) out=$2; shift ;;
	--control) fifos=${2#fifo:}; ctl=${fifos%,*}; ack=${fifos#*,}; shift ;;
	esac
	shift
done
trap 'cp "$(dirname "$0")/counts" "$out"; exit 0' INT
exec 3<>"$ctl" 4<>"$ack"
while read -r cmd <&3; do
	echo "$cmd" >>"$(dirname "$0")/commands"
	printf 'ack\n\0' >&4
done
`

// TestPerfStatControl runs the control protocol against fakePerf: two
// acknowledged commands, then the counts written on SIGINT.
func TestPerfStatControl(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "perf")
	counts := perfOutput("10", "4", "1", "0", "2", "0", "0", "0", "1", "1", "1")
	for f, body := range map[string]string{bin: fakePerf, filepath.Join(dir, "counts"): counts} {
		if err := os.WriteFile(f, []byte(body), 0o700); err != nil { //nolint:gosec // an executable of this test.
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	env := &runEnv{sup: newSupervisor(context.Background(), work), workDir: work, perf: bin, stderr: io.Discard}
	defer env.sup.stopAll()

	p, err := startPerfStat(env, "count", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	for _, c := range []string{"enable", "disable"} {
		if err := p.control(c); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	got, err := p.finish()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 10 || got[1] != 4 || len(got) != len(syscallEvents) {
		t.Fatalf("counts = %v", got)
	}
	cmds, err := os.ReadFile(filepath.Join(dir, "commands")) //nolint:gosec // a file of this test.
	if err != nil || string(cmds) != "enable\ndisable\n" {
		t.Fatalf("perf received %q (%v)", cmds, err)
	}
	p.stop()
	for _, f := range []string{"count.ctl", "count.ack"} {
		if _, err := os.Stat(filepath.Join(work, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
}

// TestPerfStatControlExited checks that a perf that exits (as one without
// the rights to count does) fails the command at once with its output.
func TestPerfStatControlExited(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "perf")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'No permission to enable raw_syscalls:sys_enter event.' >&2\nexit 1\n"), 0o700); err != nil { //nolint:gosec // an executable of this test.
		t.Fatal(err)
	}
	work := t.TempDir()
	env := &runEnv{sup: newSupervisor(context.Background(), work), workDir: work, perf: bin, stderr: io.Discard}
	p, err := startPerfStat(env, "count", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	err = p.control("enable")
	if !errors.Is(err, errPerfControl) || !strings.Contains(err.Error(), "No permission") {
		t.Fatalf("err = %v, want errPerfControl quoting perf", err)
	}
}
