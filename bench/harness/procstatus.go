//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// errProcStatus reports a /proc/PID/status without a field the harness
// needs.
var errProcStatus = errors.New("harness: unexpected /proc status")

// memStatus is the memory part of /proc/PID/status.
type memStatus struct {
	// RSSKiB is VmRSS: resident memory now.
	RSSKiB int64 `json:"rss_kib"`
	// HWMKiB is VmHWM: the peak resident memory since the process started.
	HWMKiB int64 `json:"hwm_kib"`
	// Threads is the number of OS threads.
	Threads int64 `json:"threads"`
}

// parseProcStatus reads VmRSS, VmHWM and Threads from the text of
// /proc/PID/status; every one must be present.
func parseProcStatus(b []byte) (memStatus, error) {
	var st memStatus
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &st.RSSKiB
		case "VmHWM":
			dst = &st.HWMKiB
		case "Threads":
			dst = &st.Threads
		default:
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 || (key != "Threads" && (len(fields) != 2 || fields[1] != "kB")) {
			return memStatus{}, fmt.Errorf("%w: %s %q", errProcStatus, key, val)
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 {
			return memStatus{}, fmt.Errorf("%w: %s %q", errProcStatus, key, val)
		}
		*dst = n
		seen[key] = true
	}
	for _, k := range []string{"VmRSS", "VmHWM", "Threads"} {
		if !seen[k] {
			return memStatus{}, fmt.Errorf("%w: no %s", errProcStatus, k)
		}
	}
	return st, nil
}

// readProcStatus reads the memory status of pid.
func readProcStatus(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	return parseProcStatus(b)
}

// mib converts KiB to MiB.
func mib(kib int64) float64 { return float64(kib) / 1024 }
