package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// The closed set of result label values of sluice_pressure_fetch_total:
// pressure's collection outcomes (pressure.Classify).
const (
	// FetchSuccess is a fetch that returned telemetry within
	// pressure.FetchTimeout.
	FetchSuccess = string(pressure.OutcomeSuccess)
	// FetchTimeout is a fetch that timed out, or took longer than
	// pressure.FetchTimeout by the clock (the cache counts it failed).
	FetchTimeout = string(pressure.OutcomeTimeout)
	// FetchTransportError is a fetch whose connection failed.
	FetchTransportError = string(pressure.OutcomeTransportError)
	// FetchHTTPError is a fetch answered with a non-2xx status.
	FetchHTTPError = string(pressure.OutcomeHTTPError)
	// FetchBodyTooLarge is a fetch whose body exceeded pressure.MaxBodyBytes.
	FetchBodyTooLarge = string(pressure.OutcomeBodyTooLarge)
	// FetchParseError is a fetch whose body could not be read as the
	// engine's exposition.
	FetchParseError = string(pressure.OutcomeParseError)
	// FetchMissingSeries is a fetch whose exposition lacked the engine's
	// pressure series.
	FetchMissingSeries = string(pressure.OutcomeMissingSeries)
	// FetchCancelled is a fetch cancelled because the cache closed or the
	// member was removed.
	FetchCancelled = string(pressure.OutcomeCancelled)
	// FetchOtherError is any other failure.
	FetchOtherError = string(pressure.OutcomeError)
)

// maxTrackedTargets bounds the completion times FetchMetrics keeps: twice
// the pressure cache's member bound, so reconfigurations that replace
// every member once still fit; beyond it the oldest entry is forgotten.
const maxTrackedTargets = 2 * bounds.MaxNodeMembers

// FetchMetrics counts the pressure cache's metrics fetches by result
// (sluice_pressure_fetch_total) and remembers when each target's last
// fetch completed, for sluice_pressure_age_seconds (see CapacityOptions),
// and what the last one returned when it succeeded, for the model-server
// gauges (see ModelServerOptions). It learns all three by wrapping the
// cache's Collector (Wrap), so it sees exactly the fetches the cache's
// workers make, on their goroutines. It is a prometheus.Collector; all
// methods are safe for concurrent use.
type FetchMetrics struct {
	clock   clock.PassiveClock
	fetches *prometheus.CounterVec

	mu        sync.Mutex
	completed map[pressure.Target]fetchRecord
}

// fetchRecord is what FetchMetrics keeps of a target's last fetch.
type fetchRecord struct {
	// at is when it completed, by the pressure cache's clock.
	at time.Time
	// sample is what it returned; valid only when ok.
	sample scheduler.Telemetry
	// ok says the fetch succeeded (pressure.OutcomeSuccess).
	ok bool
}

// NewFetchMetrics returns a FetchMetrics reading clk, which must be the
// pressure cache's clock. Nil means the real clock.
func NewFetchMetrics(clk clock.PassiveClock) *FetchMetrics {
	if clk == nil {
		clk = clock.RealClock{}
	}
	f := &FetchMetrics{
		clock: clk,
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: namePressureFetches,
			Help: "Engine metrics fetches made by the pressure cache, by result.",
		}, []string{labelResult}),
		completed: map[pressure.Target]fetchRecord{},
	}
	for _, o := range pressure.Outcomes {
		f.fetches.WithLabelValues(string(o))
	}
	return f
}

// Wrap returns a pressure.Collector that collects with next and counts
// every fetch. Give it to pressure.Options.Collector.
func (f *FetchMetrics) Wrap(next pressure.Collector) pressure.Collector {
	return countingCollector{next: next, metrics: f}
}

// Describe implements prometheus.Collector.
func (f *FetchMetrics) Describe(ch chan<- *prometheus.Desc) { f.fetches.Describe(ch) }

// Collect implements prometheus.Collector.
func (f *FetchMetrics) Collect(ch chan<- prometheus.Metric) { f.fetches.Collect(ch) }

// observe counts one fetch that started at start and ended now, having
// returned sample and err.
func (f *FetchMetrics) observe(target pressure.Target, start time.Time, sample scheduler.Telemetry, err error) {
	end := f.clock.Now()
	result := pressure.Classify(err, end.Sub(start))
	f.fetches.WithLabelValues(string(result)).Inc()
	if result == pressure.OutcomeCancelled {
		return // the cache discards the result: no sample was kept.
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.completed[target]; !ok && len(f.completed) >= maxTrackedTargets {
		f.forgetOldestLocked()
	}
	rec := fetchRecord{at: end, ok: result == pressure.OutcomeSuccess}
	if rec.ok {
		rec.sample = scheduler.Telemetry{Running: copyValue(sample.Running), Waiting: copyValue(sample.Waiting), KVUsage: copyValue(sample.KVUsage)}
	}
	f.completed[target] = rec
}

// copyValue returns a copy of *v, or nil: a kept sample shares no memory
// with the collector that returned it.
func copyValue(v *float64) *float64 {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// forgetOldestLocked drops the oldest completion. f.mu must be held.
func (f *FetchMetrics) forgetOldestLocked() {
	var oldest pressure.Target
	var at time.Time
	first := true
	for t, rec := range f.completed {
		if first || rec.at.Before(at) {
			oldest, at, first = t, rec.at, false
		}
	}
	delete(f.completed, oldest)
}

// completedAt returns when the target's last fetch completed.
func (f *FetchMetrics) completedAt(target pressure.Target) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.completed[target]
	return rec.at, ok
}

// lastSample returns what the target's last fetch returned and when it
// completed, when that fetch succeeded.
func (f *FetchMetrics) lastSample(target pressure.Target) (scheduler.Telemetry, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.completed[target]
	if !ok || !rec.ok {
		return scheduler.Telemetry{}, time.Time{}, false
	}
	return rec.sample, rec.at, true
}

// countingCollector is the pressure.Collector FetchMetrics.Wrap returns.
type countingCollector struct {
	next    pressure.Collector
	metrics *FetchMetrics
}

// Collect implements pressure.Collector.
func (c countingCollector) Collect(ctx context.Context, target pressure.Target) (scheduler.Telemetry, error) {
	start := c.metrics.clock.Now()
	t, err := c.next.Collect(ctx, target)
	counted := err
	if err != nil && ctx.Err() != nil {
		counted = context.Canceled // the cache cancelled it; the collector may report a transport error.
	}
	c.metrics.observe(target, start, t, counted)
	return t, err
}
