package loadgen

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// reservoirStream is the PCG stream of the sample reservoirs, so that they
// draw numbers independent of the arrival schedule with the same seed.
const reservoirStream = 0x5a3c_e11e

// Distribution is a set of latency samples with exact count, minimum,
// maximum and mean, and quantiles over the kept samples (all of them up to
// MaxSamples, a uniform reservoir beyond). The zero value is empty and
// ready to use. Add must not be called concurrently with anything else; a
// Distribution in a Result is complete and sorted, so its methods may be
// called from several goroutines.
type Distribution struct {
	samples []time.Duration
	sorted  bool
	count   int
	sum     time.Duration
	min     time.Duration
	max     time.Duration
	rng     *rand.Rand
	seed    uint64
}

// newDistribution returns an empty distribution whose reservoir is seeded
// with seed.
func newDistribution(seed uint64) Distribution {
	return Distribution{seed: seed}
}

// Add records one sample.
func (d *Distribution) Add(v time.Duration) {
	if d.count == 0 || v < d.min {
		d.min = v
	}
	if d.count == 0 || v > d.max {
		d.max = v
	}
	d.count++
	d.sum += v
	d.sorted = false
	if len(d.samples) < MaxSamples {
		d.samples = append(d.samples, v)
		return
	}
	// Algorithm R: the i-th sample replaces a kept one with probability
	// MaxSamples/i, which keeps every sample with equal probability.
	if d.rng == nil {
		d.rng = rand.New(rand.NewPCG(d.seed, reservoirStream)) //nolint:gosec // a seeded PCG makes runs reproducible; nothing here is secret.
	}
	if j := d.rng.IntN(d.count); j < MaxSamples {
		d.samples[j] = v
	}
}

// sort sorts the kept samples once.
func (d *Distribution) sort() {
	if !d.sorted {
		slices.Sort(d.samples)
		d.sorted = true
	}
}

// Count returns the number of samples recorded.
func (d *Distribution) Count() int { return d.count }

// Min returns the smallest sample, or 0 when empty.
func (d *Distribution) Min() time.Duration { return d.min }

// Max returns the largest sample, or 0 when empty.
func (d *Distribution) Max() time.Duration { return d.max }

// Mean returns the arithmetic mean of the samples, or 0 when empty.
func (d *Distribution) Mean() time.Duration {
	if d.count == 0 {
		return 0
	}
	return d.sum / time.Duration(d.count)
}

// Quantile returns the empirical q-quantile (0 ≤ q ≤ 1) of the kept
// samples: the smallest sample whose cumulative share (the fraction of
// samples at or below it) is at least q. It returns 0 when empty; q outside
// 0..1 is clamped.
func (d *Distribution) Quantile(q float64) time.Duration {
	if len(d.samples) == 0 {
		return 0
	}
	d.sort()
	q = min(max(q, 0), 1)
	if q == 0 {
		return d.samples[0]
	}
	// The smallest i with (i+1)/n ≥ q. q·n can round up past an integer
	// (0.07·100 is 7.000000000000001), so the rank below is tried with the
	// definition's own division.
	n := float64(len(d.samples))
	i := int(math.Ceil(q*n)) - 1
	if i > 0 && float64(i)/n >= q {
		i--
	}
	return d.samples[min(max(i, 0), len(d.samples)-1)]
}

// Samples returns a sorted copy of the kept samples.
func (d *Distribution) Samples() []time.Duration {
	d.sort()
	return slices.Clone(d.samples)
}

// Summary returns the distribution's count and main statistics.
func (d *Distribution) Summary() Summary {
	return Summary{
		Count: d.count,
		Min:   d.Min(),
		Mean:  d.Mean(),
		P50:   d.Quantile(0.50),
		P90:   d.Quantile(0.90),
		P95:   d.Quantile(0.95),
		P99:   d.Quantile(0.99),
		Max:   d.Max(),
	}
}

// Summary holds a distribution's count and main statistics. It marshals
// to JSON with durations in milliseconds: count, min_ms, mean_ms, p50_ms,
// p90_ms, p95_ms, p99_ms and max_ms.
type Summary struct {
	// Count is the number of samples.
	Count int
	// Min, Mean and Max are exact over every sample.
	Min, Mean, Max time.Duration
	// P50, P90, P95 and P99 are empirical quantiles of the kept samples.
	P50, P90, P95, P99 time.Duration
}

// summaryJSON is Summary's JSON form.
type summaryJSON struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Milliseconds returns d in milliseconds, rounded to the microsecond.
func Milliseconds(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
}

// MarshalJSON implements json.Marshaler.
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(summaryJSON{
		Count: s.Count,
		Min:   Milliseconds(s.Min), Mean: Milliseconds(s.Mean),
		P50: Milliseconds(s.P50), P90: Milliseconds(s.P90), P95: Milliseconds(s.P95), P99: Milliseconds(s.P99),
		Max: Milliseconds(s.Max),
	})
}

// UnmarshalJSON implements json.Unmarshaler: it reads what MarshalJSON
// writes, so that a report can be rendered again from its JSON.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var j summaryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	ms := func(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }
	*s = Summary{Count: j.Count, Min: ms(j.Min), Mean: ms(j.Mean), P50: ms(j.P50), P90: ms(j.P90), P95: ms(j.P95), P99: ms(j.P99), Max: ms(j.Max)}
	return nil
}
