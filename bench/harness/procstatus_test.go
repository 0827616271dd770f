//go:build linux

package main

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseGoMetric(t *testing.T) {
	body := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\n" +
		"# HELP go_memstats_mallocs_total Total number of heap objects allocated.\n# TYPE go_memstats_mallocs_total counter\ngo_memstats_mallocs_total 1.234567e+06\n"
	n, ok, err := parseGoMetric([]byte(body), "go_goroutines")
	if err != nil || !ok || n != 42 {
		t.Fatalf("go_goroutines = %v, %v, %v", n, ok, err)
	}
	n, ok, err = parseGoMetric([]byte(body), "go_memstats_mallocs_total")
	if err != nil || !ok || n != 1234567 {
		t.Fatalf("go_memstats_mallocs_total = %v, %v, %v", n, ok, err)
	}
	if _, ok, err := parseGoMetric([]byte("# TYPE other gauge\nother 1\n"), "go_goroutines"); err != nil || ok {
		t.Fatalf("without go_goroutines: ok=%v err=%v", ok, err)
	}
}

func TestParseProcStat(t *testing.T) {
	b := []byte("cpu  1000 50 300 8000 200 10 20 5 0 0\ncpu0 500 25 150 4000 100 5 10 2 0 0\nintr 1 2 3\n")
	m, err := parseProcStat(b)
	if err != nil {
		t.Fatal(err)
	}
	// Busy: user+nice+system+irq+softirq+steal = 1385 ticks; total adds idle and iowait.
	if m.Busy != 13.85 || m.Total != 95.85 {
		t.Fatalf("machine CPU = %+v", m)
	}
	if _, err := parseProcStat([]byte("intr 1\n")); !errors.Is(err, errProcStatus) {
		t.Fatalf("no cpu line: %v", err)
	}
	start := cpuMark{at: time.Unix(0, 0), machine: machineCPU{Busy: 10}, bench: time.Second}
	end := cpuMark{at: time.Unix(10, 0), machine: machineCPU{Busy: 20}, bench: 6 * time.Second}
	u := usageSince("s", start, end, 2)
	if u.OtherSeconds != 5 || u.OtherShare != 0.25 || u.BenchSeconds != 5 {
		t.Fatalf("usage = %+v", u)
	}
}

func TestReadProcStat(t *testing.T) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Skip("no /proc/stat:", err)
	}
	m, err := parseProcStat(b)
	if err != nil || m.Total <= 0 || m.Busy > m.Total {
		t.Fatalf("machine CPU = %+v, %v", m, err)
	}
}

func TestParseProcessCPU(t *testing.T) {
	// utime 250 and stime 50 ticks, with a command name holding a space and
	// a parenthesis.
	line := "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 4 0 100 1000 10\n"
	if got, err := parseProcessCPU([]byte(line)); err != nil || got != 3*time.Second {
		t.Fatalf("parseProcessCPU = %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"1234 no name", "1234 (x) S 1 2", "1234 (x) S 1 1 1 0 -1 0 0 0 0 0 x 50 0"} {
		if _, err := parseProcessCPU([]byte(bad)); !errors.Is(err, errProcStatus) {
			t.Errorf("parseProcessCPU(%q) = %v, want errProcStatus", bad, err)
		}
	}
	if cpu, err := processCPU(os.Getpid()); err != nil || cpu <= 0 {
		t.Fatalf("processCPU(self) = %v, %v", cpu, err)
	}
	if got := cpuPerRequestUS(2*time.Millisecond, 40); got != 50 {
		t.Fatalf("cpuPerRequestUS = %v, want 50", got)
	}
	if got := cpuPerRequestUS(time.Second, 0); got != 0 {
		t.Fatalf("cpuPerRequestUS without requests = %v", got)
	}
}
