//go:build linux

package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
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
