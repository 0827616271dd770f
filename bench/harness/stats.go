//go:build linux

package main

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// Errors of the summary statistics.
var (
	// errNoSamples reports a statistic asked of an empty set of values.
	errNoSamples = errors.New("harness: no samples")
	// errNotFinite reports a NaN or infinite value among the samples.
	errNotFinite = errors.New("harness: sample is not finite")
	// errZeroDenominator reports a ratio whose denominator is zero.
	errZeroDenominator = errors.New("harness: ratio with a zero denominator")
	// errLengthMismatch reports paired series of different lengths.
	errLengthMismatch = errors.New("harness: paired series differ in length")
)

// median returns the median of values: the middle value of an odd count,
// the mean of the two middle values of an even count. It fails on an empty
// set or a value that is not finite, so a missing measurement can never
// turn into a number.
func median(values []float64) (float64, error) {
	if len(values) == 0 {
		return 0, errNoSamples
	}
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, errNotFinite
		}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], nil
	}
	return (s[n/2-1] + s[n/2]) / 2, nil
}

// ratio returns num/den, failing when den is zero or either is not finite.
func ratio(num, den float64) (float64, error) {
	for _, v := range []float64{num, den} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, errNotFinite
		}
	}
	if den == 0 {
		return 0, errZeroDenominator
	}
	return num / den, nil
}

// pairedDifferences returns a[i]-b[i] for two series measured in the same
// rounds, so each difference compares values taken minutes apart at most.
func pairedDifferences(a, b []float64) ([]float64, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("%w: %d and %d", errLengthMismatch, len(a), len(b))
	}
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out, nil
}

// pairedRatios returns a[i]/b[i] for two series measured in the same
// rounds.
func pairedRatios(a, b []float64) ([]float64, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("%w: %d and %d", errLengthMismatch, len(a), len(b))
	}
	out := make([]float64, len(a))
	for i := range a {
		r, err := ratio(a[i], b[i])
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		out[i] = r
	}
	return out, nil
}

// medianOf returns the median of f applied to every element of xs.
func medianOf[T any](xs []T, f func(T) float64) (float64, error) {
	vals := make([]float64, len(xs))
	for i, x := range xs {
		vals[i] = f(x)
	}
	return median(vals)
}

// openLoopRun is what an open-loop scenario (hidden load, late binding)
// measured in one run that its table summarizes.
type openLoopRun struct {
	Sent      int
	TTFT, E2E loadgen.Summary
	BusyShare float64
}

// openLoopMedians are the medians over an open-loop scenario's runs of the
// latencies (milliseconds), the busy engine's share and the requests sent
// per run: the columns its table shares with the other open-loop tables.
type openLoopMedians struct {
	TTFTP50  float64 `json:"ttft_p50_ms"`
	TTFTP99  float64 `json:"ttft_p99_ms"`
	E2EP50   float64 `json:"e2e_p50_ms"`
	E2EP99   float64 `json:"e2e_p99_ms"`
	Busy     float64 `json:"busy_share"`
	Requests int     `json:"requests_per_run"`
}

// medianRuns returns the openLoopMedians of runs, each read through of.
func medianRuns[R any](runs []R, of func(R) openLoopRun) (openLoopMedians, error) {
	var m openLoopMedians
	fields := []struct {
		dst *float64
		f   func(openLoopRun) float64
	}{
		{&m.TTFTP50, func(r openLoopRun) float64 { return loadgen.Milliseconds(r.TTFT.P50) }},
		{&m.TTFTP99, func(r openLoopRun) float64 { return loadgen.Milliseconds(r.TTFT.P99) }},
		{&m.E2EP50, func(r openLoopRun) float64 { return loadgen.Milliseconds(r.E2E.P50) }},
		{&m.E2EP99, func(r openLoopRun) float64 { return loadgen.Milliseconds(r.E2E.P99) }},
		{&m.Busy, func(r openLoopRun) float64 { return r.BusyShare }},
	}
	for _, f := range fields {
		v, err := medianOf(runs, func(r R) float64 { return f.f(of(r)) })
		if err != nil {
			return m, err
		}
		*f.dst = v
	}
	n, err := medianOf(runs, func(r R) float64 { return float64(of(r).Sent) })
	m.Requests = int(n)
	return m, err
}
