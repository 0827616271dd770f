package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// The model-server gauges: the names and type of the vLLM column of the
// Gateway API Inference Extension's model server protocol (its
// docs/proposals/003-model-server-protocol, v1.5.0), so that a picker's
// default vLLM mapping reads a router as it reads a vLLM pod
// (docs/OPERATIONS.md#model-server-gauges).
const (
	// NameModelServerWaiting is TotalQueuedRequests.
	NameModelServerWaiting = "vllm:num_requests_waiting"
	// NameModelServerRunning is TotalRunningRequests.
	NameModelServerRunning = "vllm:num_requests_running"
	// NameModelServerKVUsage is KVCacheUtilization, a fraction 0..1.
	NameModelServerKVUsage = "vllm:kv_cache_usage_perc"
)

// The labels of the model-server gauges.
const (
	// LabelModelName is the tier's spec.servedModel, the model_name label
	// vLLM puts on its own series.
	LabelModelName = "model_name"
	// LabelModelServerTier is the tier's namespace/name, unique on a
	// router: a picker's label matcher selects one tier with it.
	LabelModelServerTier = labelTier
)

// SaturatedWaiting is the least waiting count a saturated tier reports: the
// default queueDepthThreshold of the inference extension's utilization
// saturation detector (v1.5.0), at or above which the detector counts an
// endpoint saturated and its filter drops it. It is the one signal of
// saturation for a tier that reports no KV cache value.
const SaturatedWaiting = 5

// PressureReader reads a Capacity tier's member pressures as a request
// does, scheduling the refresh of the members that are due without
// waiting for it; pressure.Cache implements it.
type PressureReader interface {
	// Snapshot returns the tier's member pressures.
	Snapshot(tier string) (map[string]scheduler.Pressure, error)
}

// ModelServerOptions configures a ModelServerCollector.
type ModelServerOptions struct {
	// Source is read once per scrape. Required.
	Source CapacitySource
	// Pressure, Targets and Fetches, when all set, give the members'
	// fresh waiting counts and KV cache values; any nil leaves them out
	// (waiting is then the admission queue's alone, and KV is absent).
	Pressure PressureReader
	// Targets maps a member to its pressure target.
	Targets TargetSource
	// Fetches keeps each target's last successful sample; it must wrap
	// the collector of the cache Pressure reads.
	Fetches *FetchMetrics
	// Clock judges the age of a sample. Nil means the real clock; it must
	// be the pressure cache's clock.
	Clock clock.PassiveClock
}

// ModelServerCollector is the prometheus.Collector of the model-server
// gauges, one series each per serving tier, labelled model_name and tier
// (docs/OPERATIONS.md#model-server-gauges):
//
//   - vllm:num_requests_waiting: the tier's admission queue plus the
//     waiting counts its members report freshly, at least SaturatedWaiting
//     when the tier is saturated;
//   - vllm:num_requests_running: the tier's reservations, exact;
//   - vllm:kv_cache_usage_perc: the least KV cache value among the
//     eligible members whose value is fresh, a member at its ceiling
//     counting 1, and 1 when the tier is saturated; absent when no
//     eligible member's value is fresh.
//
// A tier that does not serve (removed, quiesced, no eligible member) has
// no series. A member's value counts only when the pressure cache reads it
// fresh and the sample it was computed from normalizes fresh at scrape
// time; stale, failed and unknown values never count. Every value of a
// tier comes from one capacity view and one pressure snapshot.
type ModelServerCollector struct {
	source   CapacitySource
	pressure PressureReader
	targets  TargetSource
	fetches  *FetchMetrics
	clock    clock.PassiveClock

	waiting, running, kvUsage *prometheus.Desc
}

// NewModelServerCollector returns the collector of opts.Source.
func NewModelServerCollector(opts ModelServerOptions) *ModelServerCollector {
	labels := []string{LabelModelName, LabelModelServerTier}
	c := &ModelServerCollector{
		source:   opts.Source,
		pressure: opts.Pressure,
		targets:  opts.Targets,
		fetches:  opts.Fetches,
		clock:    opts.Clock,
		waiting: prometheus.NewDesc(NameModelServerWaiting,
			"Model server protocol TotalQueuedRequests of the tier: its admission queue plus its members' fresh waiting counts; at least 5 when saturated.", labels, nil),
		running: prometheus.NewDesc(NameModelServerRunning,
			"Model server protocol TotalRunningRequests of the tier: requests holding a reservation.", labels, nil),
		kvUsage: prometheus.NewDesc(NameModelServerKVUsage,
			"Model server protocol KVCacheUtilization of the tier (0..1): the least fresh value among eligible members, a full member counting 1; 1 when saturated; absent when none is fresh.", labels, nil),
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *ModelServerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.running
	ch <- c.kvUsage
}

// Collect implements prometheus.Collector: one capacity view, and one
// pressure snapshot per serving Capacity tier.
func (c *ModelServerCollector) Collect(ch chan<- prometheus.Metric) {
	view := c.source.Capacity()
	now := c.clock.Now()
	for i := range view.Tiers {
		t := &view.Tiers[i]
		if t.NotServing() != "" {
			continue
		}
		g := c.gauges(t, now)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, g.waiting, t.ServedModel, t.Tier)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(t.Active), t.ServedModel, t.Tier)
		if g.kvKnown {
			ch <- prometheus.MustNewConstMetric(c.kvUsage, prometheus.GaugeValue, g.kv, t.ServedModel, t.Tier)
		}
	}
}

// tierGauges are one tier's computed waiting and KV values.
type tierGauges struct {
	waiting float64
	kv      float64
	kvKnown bool
}

// gauges computes a serving tier's waiting and KV values.
func (c *ModelServerCollector) gauges(t *adminapi.TierCapacity, now time.Time) tierGauges {
	g := tierGauges{waiting: float64(t.Queue.Waiting), kv: 1}
	fresh := c.freshSamples(t, now)
	for i := range t.Members {
		m := &t.Members[i]
		s, ok := fresh[m.ID]
		if !ok {
			continue
		}
		if s.waiting != nil {
			g.waiting += *s.waiting
		}
		if s.kv != nil && m.Eligible() {
			kv := *s.kv
			if m.Full() || t.AtCeiling() {
				kv = 1 // it takes no request: as full as a cache can be.
			}
			g.kv, g.kvKnown = min(g.kv, kv), true
		}
	}
	if t.Saturated() {
		g.waiting = max(g.waiting, SaturatedWaiting)
		g.kv = 1
	}
	return g
}

// freshValues are one member's fresh waiting count and KV value; nil when
// not fresh.
type freshValues struct {
	waiting, kv *float64
}

// freshSamples returns the fresh values of the tier's current members:
// those the pressure cache reads fresh, whose last successful sample
// normalizes fresh now, each signal only when valid.
func (c *ModelServerCollector) freshSamples(t *adminapi.TierCapacity, now time.Time) map[string]freshValues {
	if c.pressure == nil || c.targets == nil || c.fetches == nil || !bounds.Strategy(t.Strategy).UsesPressure() {
		return nil
	}
	pressures, err := c.pressure.Snapshot(t.Tier)
	if err != nil {
		return nil
	}
	targets := c.targets.MetricsTargets(t.Tier)
	out := map[string]freshValues{}
	for i := range t.Members {
		m := &t.Members[i]
		target, ok := targets[m.ID]
		if !ok || m.State == adminapi.StateRemoved || m.MaxConcurrency == nil ||
			pressures[m.ID].Freshness != scheduler.FreshnessFresh {
			continue
		}
		sample, at, ok := c.fetches.lastSample(target)
		if !ok {
			continue
		}
		p := scheduler.Normalize(at, now, true, *m.MaxConcurrency, sample)
		if p.Freshness != scheduler.FreshnessFresh {
			continue
		}
		var v freshValues
		if p.RequestState == scheduler.SignalValid {
			v.waiting = sample.Waiting
		}
		if p.KVState == scheduler.SignalValid {
			v.kv = sample.KVUsage
		}
		out[m.ID] = v
	}
	return out
}

// The pressure cache is the PressureReader the router passes.
var _ PressureReader = (*pressure.Cache)(nil)
