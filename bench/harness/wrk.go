//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Errors of wrk runs.
var (
	// errWrkOutput reports wrk output the parser does not recognise or
	// that lacks a figure the harness needs.
	errWrkOutput = errors.New("harness: unexpected wrk output")
	// errWrkFailures reports a wrk run with non-2xx responses or socket
	// errors: its figures would not measure the path under test.
	errWrkFailures = errors.New("harness: wrk saw failed requests")
)

// wrkPercentiles are the latency percentiles `wrk --latency` prints.
var wrkPercentiles = []float64{50, 75, 90, 99}

// wrkResult is what one wrk run reported.
type wrkResult struct {
	// Requests is the number of completed requests.
	Requests int `json:"requests"`
	// Seconds is the measured duration wrk reported.
	Seconds float64 `json:"seconds"`
	// RPS is wrk's Requests/sec figure.
	RPS float64 `json:"rps"`
	// LatencyUS maps a percentile (50, 75, 90, 99) to its latency in
	// microseconds.
	LatencyUS map[float64]float64 `json:"-"`
	// P50US, P90US and P99US repeat LatencyUS for the JSON results.
	P50US float64 `json:"p50_us"`
	// P90US is the 90th percentile latency in microseconds.
	P90US float64 `json:"p90_us"`
	// P99US is the 99th percentile latency in microseconds.
	P99US float64 `json:"p99_us"`
	// Non2xx counts responses with a status of 400 or more (wrk's
	// "Non-2xx or 3xx responses").
	Non2xx int `json:"non_2xx"`
	// SocketErrors sums connect, read, write and timeout errors.
	SocketErrors int `json:"socket_errors"`
}

var (
	wrkPercentileRE = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)%\s+(\S+)\s*$`)
	wrkRequestsRE   = regexp.MustCompile(`^\s*(\d+) requests in (\S+), `)
	wrkRPSRE        = regexp.MustCompile(`^Requests/sec:\s+(\S+)\s*$`)
	wrkNon2xxRE     = regexp.MustCompile(`^\s*Non-2xx or 3xx responses:\s+(\d+)\s*$`)
	wrkSocketRE     = regexp.MustCompile(`^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)\s*$`)
)

// parseWrkDuration parses a wrk duration such as "57.00us", "1.05ms",
// "2.00s" or "1.00m" into microseconds.
func parseWrkDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("%w: duration %q", errWrkOutput, s)
			}
			return v * u.us, nil
		}
	}
	return 0, fmt.Errorf("%w: duration %q", errWrkOutput, s)
}

// parseWrk parses the text output of `wrk --latency`. It fails when a
// figure is missing; it does not judge failures (see wrkResult.check).
func parseWrk(out string) (wrkResult, error) {
	r := wrkResult{LatencyUS: map[float64]float64{}}
	var inDist, haveRequests, haveRPS bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "Latency Distribution" {
			inDist = true
			continue
		}
		if m := wrkPercentileRE.FindStringSubmatch(line); inDist && m != nil {
			p, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return wrkResult{}, fmt.Errorf("%w: percentile %q", errWrkOutput, m[1])
			}
			us, err := parseWrkDuration(m[2])
			if err != nil {
				return wrkResult{}, err
			}
			r.LatencyUS[p] = us
			continue
		}
		inDist = false
		switch {
		case wrkRequestsRE.MatchString(line):
			m := wrkRequestsRE.FindStringSubmatch(line)
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return wrkResult{}, fmt.Errorf("%w: request count %q", errWrkOutput, m[1])
			}
			us, err := parseWrkDuration(m[2])
			if err != nil {
				return wrkResult{}, err
			}
			r.Requests, r.Seconds, haveRequests = n, us/1e6, true
		case wrkRPSRE.MatchString(line):
			m := wrkRPSRE.FindStringSubmatch(line)
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return wrkResult{}, fmt.Errorf("%w: Requests/sec %q", errWrkOutput, m[1])
			}
			r.RPS, haveRPS = v, true
		case wrkNon2xxRE.MatchString(line):
			n, _ := strconv.Atoi(wrkNon2xxRE.FindStringSubmatch(line)[1])
			r.Non2xx = n
		case wrkSocketRE.MatchString(line):
			m := wrkSocketRE.FindStringSubmatch(line)
			for _, s := range m[1:] {
				n, _ := strconv.Atoi(s)
				r.SocketErrors += n
			}
		}
	}
	if !haveRequests || !haveRPS {
		return wrkResult{}, fmt.Errorf("%w: no request count or Requests/sec", errWrkOutput)
	}
	for _, p := range wrkPercentiles {
		if _, ok := r.LatencyUS[p]; !ok {
			return wrkResult{}, fmt.Errorf("%w: no %g%% latency (run wrk with --latency)", errWrkOutput, p)
		}
	}
	r.P50US, r.P90US, r.P99US = r.LatencyUS[50], r.LatencyUS[90], r.LatencyUS[99]
	return r, nil
}

// check fails when the run saw failed requests or measured nothing.
func (r wrkResult) check() error {
	switch {
	case r.Requests == 0 || r.RPS <= 0:
		return fmt.Errorf("%w: no request completed", errWrkFailures)
	case r.Non2xx > 0:
		return fmt.Errorf("%w: %d non-2xx responses of %d", errWrkFailures, r.Non2xx, r.Requests)
	case r.SocketErrors > 0:
		return fmt.Errorf("%w: %d socket errors", errWrkFailures, r.SocketErrors)
	}
	return nil
}

// wrkScript returns the Lua script that makes wrk POST body as JSON.
func wrkScript(body string) string {
	// Lua long brackets need no escaping as long as the body holds no "]]".
	return "wrk.method = \"POST\"\n" +
		"wrk.headers[\"Content-Type\"] = \"application/json\"\n" +
		"wrk.body = [[" + body + "]]\n"
}

// wrkRun describes one wrk invocation.
type wrkRun struct {
	// URL is the target.
	URL string
	// Script is the Lua script's path.
	Script string
	// Threads and Connections are wrk's -t and -c.
	Threads, Connections int
	// Duration is wrk's -d.
	Duration time.Duration
}

// args returns wrk's command line arguments.
func (w wrkRun) args() []string {
	return []string{
		"-t", strconv.Itoa(w.Threads),
		"-c", strconv.Itoa(w.Connections),
		"-d", fmt.Sprintf("%ds", int(w.Duration.Round(time.Second)/time.Second)),
		"--latency",
		"-s", w.Script,
		w.URL,
	}
}

// writeWrkScript writes the script for body into dir and returns its path.
func writeWrkScript(dir, name, body string) (string, error) {
	if strings.Contains(body, "]]") {
		return "", fmt.Errorf("harness: request body cannot be quoted in Lua: %q", body)
	}
	p := filepath.Join(dir, name+".lua")
	return p, os.WriteFile(p, []byte(wrkScript(body)), 0o600)
}

// runWrk runs wrk under the supervisor, parses and checks its output.
func runWrk(ctx context.Context, sup *supervisor, name string, w wrkRun) (wrkResult, error) {
	out, err := sup.runTool(ctx, name, "wrk", w.args()...)
	if err != nil {
		return wrkResult{}, err
	}
	r, err := parseWrk(out)
	if err != nil {
		return wrkResult{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := r.check(); err != nil {
		return wrkResult{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}
