package loadgen

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestDistributionEmpty(t *testing.T) {
	var d Distribution
	if d.Count() != 0 || d.Min() != 0 || d.Max() != 0 || d.Mean() != 0 || d.Quantile(0.5) != 0 {
		t.Fatalf("empty distribution = %+v", d.Summary())
	}
}

func TestDistributionStatistics(t *testing.T) {
	var d Distribution
	for _, ms := range []int{40, 10, 30, 20, 50} {
		d.Add(time.Duration(ms) * time.Millisecond)
	}
	s := d.Summary()
	want := Summary{Count: 5, Min: 10 * time.Millisecond, Mean: 30 * time.Millisecond, Max: 50 * time.Millisecond,
		P50: 30 * time.Millisecond, P90: 50 * time.Millisecond, P95: 50 * time.Millisecond, P99: 50 * time.Millisecond}
	if s != want {
		t.Fatalf("Summary = %+v, want %+v", s, want)
	}
	if got := d.Quantile(0.2); got != 10*time.Millisecond {
		t.Fatalf("Quantile(0.2) = %v", got)
	}
	if got := d.Quantile(0.21); got != 20*time.Millisecond {
		t.Fatalf("Quantile(0.21) = %v", got)
	}
	if got, want := d.Quantile(-1), 10*time.Millisecond; got != want {
		t.Fatalf("Quantile(-1) = %v", got)
	}
	if got, want := d.Quantile(2), 50*time.Millisecond; got != want {
		t.Fatalf("Quantile(2) = %v", got)
	}
	if got := d.Samples(); !slices.IsSorted(got) || len(got) != 5 {
		t.Fatalf("Samples = %v", got)
	}
}

// TestQuantileIsTheEmpiricalQuantile pins Quantile to its definition,
// computed the slow way: the smallest sample whose cumulative share (the
// fraction of samples at or below it) is at least q.
func TestQuantileIsTheEmpiricalQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // reproducible test data.
	for _, n := range []int{1, 2, 3, 7, 100, 1000, 4097} {
		var d Distribution
		xs := make([]time.Duration, n)
		for i := range n {
			xs[i] = time.Duration(rng.Int64N(int64(time.Second / 4)))
			d.Add(xs[i])
		}
		for _, q := range []float64{0, 0.001, 0.01, 0.07, 0.1, 0.25, 0.29, 0.5, 0.57, 0.9, 0.95, 0.99, 0.999, 1} {
			want := slices.Max(xs)
			for _, x := range xs {
				atOrBelow := 0
				for _, y := range xs {
					if y <= x {
						atOrBelow++
					}
				}
				if float64(atOrBelow)/float64(n) >= q && x < want {
					want = x
				}
			}
			if got := d.Quantile(q); got != want {
				t.Fatalf("n=%d q=%v: Quantile = %v, want %v", n, q, got, want)
			}
		}
	}
}

func TestDistributionReservoir(t *testing.T) {
	d := newDistribution(7)
	const extra = 1000
	for i := range MaxSamples + extra {
		d.Add(time.Duration(i + 1))
	}
	if d.Count() != MaxSamples+extra || len(d.samples) != MaxSamples {
		t.Fatalf("count %d, kept %d", d.Count(), len(d.samples))
	}
	if d.Min() != 1 || d.Max() != MaxSamples+extra {
		t.Fatalf("min %v max %v", d.Min(), d.Max())
	}
	if want := time.Duration((MaxSamples + extra + 1) / 2); d.Mean() != want {
		t.Fatalf("mean %v, want %v", d.Mean(), want)
	}
	// A uniform reservoir of a uniform sequence keeps the median near the
	// middle; 1% of the range is far beyond its sampling error.
	mid := float64(MaxSamples+extra) / 2
	if got := float64(d.Quantile(0.5)); got < mid*0.99 || got > mid*1.01 {
		t.Fatalf("median %v, want about %v", got, mid)
	}
}

func TestSummaryJSON(t *testing.T) {
	s := Summary{Count: 2, Min: 1500 * time.Microsecond, Mean: 2 * time.Millisecond, P50: time.Millisecond,
		P90: 2 * time.Millisecond, P95: 3 * time.Millisecond, P99: 4 * time.Millisecond, Max: 5*time.Millisecond + 499}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"count":2,"min_ms":1.5,"mean_ms":2,"p50_ms":1,"p90_ms":2,"p95_ms":3,"p99_ms":4,"max_ms":5}`
	if string(b) != want {
		t.Fatalf("JSON = %s, want %s", b, want)
	}
	// Read back, the summary is what was written, to the microsecond.
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	s.Max = s.Max.Round(time.Microsecond)
	if back != s {
		t.Fatalf("read back %+v, want %+v", back, s)
	}
}

func TestArrivalsArePoissonAndReproducible(t *testing.T) {
	const rate, n = 50.0, 20000
	a, b := arrivals(42, rate), arrivals(42, rate)
	var sum time.Duration
	for i := range n {
		x, y := a(), b()
		if x != y {
			t.Fatalf("arrival %d differs for one seed: %v vs %v", i, x, y)
		}
		if x < 0 {
			t.Fatalf("negative gap %v", x)
		}
		sum += x
	}
	// The mean gap of an exponential with rate 50/s is 20 ms; over 20000
	// draws its standard error is 0.7%, so 5% is a loose bound.
	mean := sum.Seconds() / n
	if mean < 0.95/rate || mean > 1.05/rate {
		t.Fatalf("mean gap %v s, want about %v s", mean, 1/rate)
	}
	if arrivals(43, rate)() == arrivals(42, rate)() {
		t.Fatal("different seeds gave the same first gap")
	}
}
