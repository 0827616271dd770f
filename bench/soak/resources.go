package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// errResources reports a /proc file or an exposition without what the soak
// reads from it.
var errResources = errors.New("soak: unreadable process resources")

// parseGoroutines reads go_goroutines from a Prometheus text exposition.
func parseGoroutines(body []byte) (int, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errResources, err)
	}
	f, ok := families["go_goroutines"]
	if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
		return 0, fmt.Errorf("%w: no go_goroutines gauge", errResources)
	}
	return int(f.GetMetric()[0].GetGauge().GetValue()), nil
}

// parseRSS reads VmRSS (KiB) from the text of /proc/PID/status.
func parseRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "VmRSS" {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			break
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 {
			break
		}
		return n, nil
	}
	return 0, fmt.Errorf("%w: no VmRSS in kB", errResources)
}

// processFDs counts the open file descriptors of pid.
func processFDs(pid int) (int, error) {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errResources, err)
	}
	return len(entries), nil
}

// processRSS returns the resident memory of pid in KiB.
func processRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errResources, err)
	}
	return parseRSS(b)
}
