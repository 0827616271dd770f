// Package procstat reads a process's memory from Linux's /proc/PID/status,
// for the benchmark harness, the chaos soak and the end-to-end tests that bound the
// router's resident memory.
package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrStatus reports a /proc/PID/status without a field Parse needs, or
// with one it cannot read.
var ErrStatus = errors.New("procstat: unexpected /proc status")

// Memory is the memory part of /proc/PID/status.
type Memory struct {
	// RSSKiB is VmRSS: resident memory now.
	RSSKiB int64 `json:"rss_kib"`
	// HWMKiB is VmHWM: the peak resident memory since the process started.
	HWMKiB int64 `json:"hwm_kib"`
	// Threads is the number of OS threads.
	Threads int64 `json:"threads"`
	// AnonKiB and FileKiB split VmRSS (RssAnon, RssFile): the process's own
	// memory, and the pages of files it maps (its binary's among them),
	// which the kernel can drop and read again. Zero where the kernel does
	// not report them (before Linux 4.5).
	AnonKiB int64 `json:"rss_anon_kib,omitempty"`
	// FileKiB is RssFile.
	FileKiB int64 `json:"rss_file_kib,omitempty"`
}

// Parse reads VmRSS, VmHWM and Threads from the text of /proc/PID/status,
// every one of which must be present, and RssAnon and RssFile where they
// are.
func Parse(b []byte) (Memory, error) {
	var st Memory
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
		case "RssAnon":
			dst = &st.AnonKiB
		case "RssFile":
			dst = &st.FileKiB
		default:
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 || (key != "Threads" && (len(fields) != 2 || fields[1] != "kB")) {
			return Memory{}, fmt.Errorf("%w: %s %q", ErrStatus, key, val)
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 {
			return Memory{}, fmt.Errorf("%w: %s %q", ErrStatus, key, val)
		}
		*dst = n
		seen[key] = true
	}
	for _, k := range []string{"VmRSS", "VmHWM", "Threads"} {
		if !seen[k] {
			return Memory{}, fmt.Errorf("%w: no %s", ErrStatus, k)
		}
	}
	return st, nil
}

// Read reads the memory of pid.
func Read(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	return Parse(b)
}
