package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

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

// processFDs counts the open file descriptors of pid.
func processFDs(pid int) (int, error) {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errResources, err)
	}
	return len(entries), nil
}
