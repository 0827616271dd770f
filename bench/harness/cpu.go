//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicksPerSecond is USER_HZ, the unit of /proc/stat: 100 on every
// Linux architecture Go supports.
const clockTicksPerSecond = 100

// machineCPU is the first line of /proc/stat in seconds of CPU time.
type machineCPU struct {
	// Busy is every state but idle and iowait, summed over the CPUs.
	Busy float64
	// Total is every state, summed over the CPUs.
	Total float64
}

// parseProcStat reads the aggregate "cpu" line of /proc/stat.
func parseProcStat(b []byte) (machineCPU, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[0] != "cpu" {
			continue
		}
		var m machineCPU
		// user nice system idle iowait irq softirq steal guest guest_nice;
		// guest time is already counted in user, so stop at steal.
		for i, s := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return machineCPU{}, fmt.Errorf("%w: /proc/stat field %q", errProcStatus, s)
			}
			sec := float64(v) / clockTicksPerSecond
			m.Total += sec
			if i != 3 && i != 4 {
				m.Busy += sec
			}
		}
		return m, nil
	}
	return machineCPU{}, fmt.Errorf("%w: no cpu line in /proc/stat", errProcStatus)
}

// cpuUsage is how the machine's CPU time was spent during one scenario.
type cpuUsage struct {
	// Scenario names the scenario.
	Scenario string `json:"scenario"`
	// WallSeconds is the scenario's duration.
	WallSeconds float64 `json:"wall_seconds"`
	// MachineBusySeconds is the CPU time every process on the machine used.
	MachineBusySeconds float64 `json:"machine_busy_cpu_seconds"`
	// BenchSeconds is the CPU time of the harness and every process it
	// started (router, engines, HAProxy, wrk, builds excluded).
	BenchSeconds float64 `json:"bench_cpu_seconds"`
	// OtherSeconds is the rest: other people's builds and tests, the
	// kernel's own work.
	OtherSeconds float64 `json:"other_cpu_seconds"`
	// OtherShare is OtherSeconds over the machine's capacity in the
	// scenario (wall time × CPUs).
	OtherShare float64 `json:"other_share_of_machine"`
}

// cpuMark is a point to measure CPU use from.
type cpuMark struct {
	at      time.Time
	machine machineCPU
	bench   time.Duration
}

// selfCPU returns the harness's own user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMark samples the machine's and the benchmark's CPU time. Only
// processes that exited count, so marks are taken between scenarios, when
// none of the scenario's processes runs.
func (s *supervisor) cpuMark() (cpuMark, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuMark{}, err
	}
	m, err := parseProcStat(b)
	if err != nil {
		return cpuMark{}, err
	}
	return cpuMark{at: time.Now(), machine: m, bench: s.childCPU() + selfCPU()}, nil
}

// usageSince returns the CPU use from start to end.
func usageSince(scenario string, start, end cpuMark, cpus int) cpuUsage {
	u := cpuUsage{
		Scenario:           scenario,
		WallSeconds:        end.at.Sub(start.at).Seconds(),
		MachineBusySeconds: end.machine.Busy - start.machine.Busy,
		BenchSeconds:       (end.bench - start.bench).Seconds(),
	}
	u.OtherSeconds = max(0, u.MachineBusySeconds-u.BenchSeconds)
	if capacity := u.WallSeconds * float64(cpus); capacity > 0 {
		u.OtherShare = u.OtherSeconds / capacity
	}
	return u
}

// processCPU returns the CPU time (user and system) process pid has used,
// from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcessCPU(b)
}

// parseProcessCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its closing parenthesis.
func parseProcessCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: no command name in a stat line", errProcStatus)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: %d fields after the command name", errProcStatus, len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] { // fields 14 and 15 of the line
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: stat field %q", errProcStatus, s)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil //nolint:gosec // a process's CPU ticks fit an int64 for 2^63 / 100 s.
}
