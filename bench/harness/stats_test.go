//go:build linux

package main

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name    string
		in      []float64
		want    float64
		wantErr error
	}{
		{name: "one", in: []float64{3}, want: 3},
		{name: "odd unsorted", in: []float64{5, 1, 3}, want: 3},
		{name: "even", in: []float64{4, 1, 3, 2}, want: 2.5},
		{name: "duplicates", in: []float64{2, 2, 9}, want: 2},
		{name: "empty", in: nil, wantErr: errNoSamples},
		{name: "nan", in: []float64{1, math.NaN()}, wantErr: errNotFinite},
		{name: "inf", in: []float64{math.Inf(1)}, wantErr: errNotFinite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			got, err := median(tc.in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("median(%v) error = %v, want %v", tc.in, err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] && !math.IsNaN(in[i]) {
					t.Fatalf("median reordered its input: %v", tc.in)
				}
			}
		})
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		name     string
		num, den float64
		want     float64
		wantErr  error
	}{
		{name: "plain", num: 7, den: 10, want: 0.7},
		{name: "zero numerator", num: 0, den: 3, want: 0},
		{name: "zero denominator", num: 1, den: 0, wantErr: errZeroDenominator},
		{name: "nan", num: math.NaN(), den: 1, wantErr: errNotFinite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ratio(tc.num, tc.den)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ratio error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("ratio = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPairedSeries(t *testing.T) {
	a := []float64{10, 20, 30}
	b := []float64{5, 10, 10}
	d, err := pairedDifferences(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{5, 10, 20}; !equalFloats(d, want) {
		t.Fatalf("differences = %v, want %v", d, want)
	}
	r, err := pairedRatios(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{2, 2, 3}; !equalFloats(r, want) {
		t.Fatalf("ratios = %v, want %v", r, want)
	}
	if m, _ := median(r); m != 2 {
		t.Fatalf("median ratio = %v, want 2", m)
	}
	if _, err := pairedDifferences(a, b[:2]); !errors.Is(err, errLengthMismatch) {
		t.Fatalf("length mismatch error = %v", err)
	}
	if _, err := pairedRatios(a, []float64{1, 0, 1}); !errors.Is(err, errZeroDenominator) {
		t.Fatalf("zero denominator error = %v", err)
	}
}

// equalFloats reports whether two slices hold the same values.
func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// TestMedianRuns: each column of an open-loop table is the median over the
// runs of its own measure, in milliseconds for the latencies.
func TestMedianRuns(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	runs := []openLoopRun{
		{Sent: 10, TTFT: loadgen.Summary{P50: ms(1), P99: ms(10)}, E2E: loadgen.Summary{P50: ms(100), P99: ms(1000)}, BusyShare: 0.1},
		{Sent: 30, TTFT: loadgen.Summary{P50: ms(3), P99: ms(30)}, E2E: loadgen.Summary{P50: ms(300), P99: ms(3000)}, BusyShare: 0.3},
		{Sent: 20, TTFT: loadgen.Summary{P50: ms(2), P99: ms(20)}, E2E: loadgen.Summary{P50: ms(200), P99: ms(2000)}, BusyShare: 0.2},
	}
	got, err := medianRuns(runs, func(r openLoopRun) openLoopRun { return r })
	if err != nil {
		t.Fatal(err)
	}
	if want := (openLoopMedians{TTFTP50: 2, TTFTP99: 20, E2EP50: 200, E2EP99: 2000, Busy: 0.2, Requests: 20}); got != want {
		t.Errorf("medianRuns = %+v, want %+v", got, want)
	}
	if _, err := medianRuns([]openLoopRun{}, func(r openLoopRun) openLoopRun { return r }); !errors.Is(err, errNoSamples) {
		t.Errorf("no runs: %v, want errNoSamples", err)
	}
}
