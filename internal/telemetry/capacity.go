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

// CapacitySource is what the capacity collector reads once per scrape:
// adminserver.Admin implements it with the view GET /admin/v1/capacity serves,
// which takes one admission Snapshot and, for Capacity tiers, one pressure
// Peek per tier.
type CapacitySource interface {
	// Capacity returns the current capacity view.
	Capacity() adminapi.CapacityView
}

// TargetSource maps a Capacity tier's members to their pressure targets;
// tiers.Set implements it. It is read only to label metrics-fetch ages
// with member ids.
type TargetSource interface {
	// MetricsTargets returns the targets of the tier's members that
	// declare metrics.
	MetricsTargets(tier string) map[string]pressure.Target
}

// CapacityOptions configures a CapacityCollector.
type CapacityOptions struct {
	// Source is read once per scrape. Required.
	Source CapacitySource
	// Targets and Fetches, when both set, add sluice_pressure_age_seconds
	// for Capacity members whose metrics were fetched. Nil leaves the
	// metric out.
	Targets TargetSource
	// Fetches records when each target's last fetch completed.
	Fetches *FetchMetrics
	// Clock is read once per scrape for the ages. Nil means the real clock;
	// it must be the pressure cache's clock.
	Clock clock.PassiveClock
}

// CapacityCollector is the prometheus.Collector of the gauges read at
// scrape time: per tier sluice_tier_active_requests and
// sluice_tier_max_concurrency, per member sluice_member_active_requests,
// sluice_member_max_concurrency, sluice_member_ready and, for Capacity
// tiers, sluice_member_pressure_freshness (one-hot over fresh, stale,
// failed and unknown), sluice_member_pressure_ppm (fresh only) and
// sluice_pressure_age_seconds; per tier sluice_queue_waiting_requests and
// sluice_queue_oldest_wait_seconds (0 for a tier without a queue or with
// none waiting) and sluice_queue_max_requests (absent without a queue).
// Unavailable values (an unbounded ceiling, a
// PPM that is not fresh, a member never fetched) are left out, never
// reported as zero. Every value of one tier comes from one view, so
// sluice_tier_active_requests always equals the sum of its members'
// sluice_member_active_requests within a scrape.
type CapacityCollector struct {
	source  CapacitySource
	targets TargetSource
	fetches *FetchMetrics
	clock   clock.PassiveClock

	tierActive, tierMax                           *prometheus.Desc
	queueWaiting, queueMax, queueOldest           *prometheus.Desc
	memberActive, memberMax, memberReady          *prometheus.Desc
	memberPPM, memberFreshness, memberPressureAge *prometheus.Desc
}

// NewCapacityCollector returns the collector of opts.Source.
func NewCapacityCollector(opts CapacityOptions) *CapacityCollector {
	tier := []string{labelTier}
	member := []string{labelTier, labelMember}
	c := &CapacityCollector{
		source:  opts.Source,
		targets: opts.Targets,
		fetches: opts.Fetches,
		clock:   opts.Clock,
		tierActive: prometheus.NewDesc(nameTierActive,
			"Requests holding a reservation of the tier (always the sum of its members').", tier, nil),
		tierMax: prometheus.NewDesc(nameTierMax,
			"Effective concurrency ceiling of the tier; absent when unbounded.", tier, nil),
		queueWaiting: prometheus.NewDesc(nameQueueWaiting,
			"Requests waiting in the tier's admission queue; 0 for a tier without a queue.", tier, nil),
		queueMax: prometheus.NewDesc(nameQueueMax,
			"Bound of the tier's admission queue (spec.queue.maxRequests); absent when the tier has no queue.", tier, nil),
		queueOldest: prometheus.NewDesc(nameQueueOldestWait,
			"Seconds the longest-waiting request of the tier's admission queue has waited, whole milliseconds; 0 when none waits.", tier, nil),
		memberActive: prometheus.NewDesc(nameMemberActive,
			"Requests holding a reservation of the member.", member, nil),
		memberMax: prometheus.NewDesc(nameMemberMax,
			"Concurrency ceiling of the member; absent when it has none.", member, nil),
		memberReady: prometheus.NewDesc(nameMemberReady,
			"1 when the member's latest readiness probe found it serving the tier's model, else 0.", member, nil),
		memberPPM: prometheus.NewDesc(nameMemberPPM,
			"Cached upstream pressure of a Capacity member in parts per million of its ceiling; present only while fresh.", member, nil),
		memberFreshness: prometheus.NewDesc(nameMemberFreshness,
			"Freshness class of a Capacity member's cached pressure, one-hot over fresh, stale, failed and unknown.",
			[]string{labelTier, labelMember, labelFreshness}, nil),
		memberPressureAge: prometheus.NewDesc(namePressureAge,
			"Seconds since the Capacity member's last metrics fetch completed, the age of its cached sample; absent before the first.", member, nil),
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *CapacityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tierActive, c.tierMax, c.queueWaiting, c.queueMax, c.queueOldest, c.memberActive, c.memberMax,
		c.memberReady, c.memberPPM, c.memberFreshness, c.memberPressureAge} {
		ch <- d
	}
}

// freshnessClasses is the one-hot domain of sluice_member_pressure_freshness.
var freshnessClasses = []scheduler.Freshness{
	scheduler.FreshnessFresh, scheduler.FreshnessStale, scheduler.FreshnessFailed, scheduler.FreshnessUnknown,
}

// Collect implements prometheus.Collector: one capacity view, projected.
func (c *CapacityCollector) Collect(ch chan<- prometheus.Metric) {
	view := c.source.Capacity()
	now := c.clock.Now()
	for i := range view.Tiers {
		t := &view.Tiers[i]
		ch <- prometheus.MustNewConstMetric(c.tierActive, prometheus.GaugeValue, float64(t.Active), t.Tier)
		if t.MaxConcurrency != nil {
			ch <- prometheus.MustNewConstMetric(c.tierMax, prometheus.GaugeValue, float64(*t.MaxConcurrency), t.Tier)
		}
		ch <- prometheus.MustNewConstMetric(c.queueWaiting, prometheus.GaugeValue, float64(t.Queue.Waiting), t.Tier)
		ch <- prometheus.MustNewConstMetric(c.queueOldest, prometheus.GaugeValue, float64(t.Queue.OldestWaitMillis)/1000, t.Tier)
		if t.Queue.MaxRequests != nil {
			ch <- prometheus.MustNewConstMetric(c.queueMax, prometheus.GaugeValue, float64(*t.Queue.MaxRequests), t.Tier)
		}
		var targets map[string]pressure.Target
		if c.targets != nil && c.fetches != nil && bounds.Strategy(t.Strategy).UsesPressure() {
			targets = c.targets.MetricsTargets(t.Tier)
		}
		for j := range t.Members {
			c.collectMember(ch, t.Tier, &t.Members[j], targets, now)
		}
	}
}

// collectMember sends one member's gauges.
func (c *CapacityCollector) collectMember(ch chan<- prometheus.Metric, tier string, m *adminapi.MemberCapacity,
	targets map[string]pressure.Target, now time.Time) {
	ch <- prometheus.MustNewConstMetric(c.memberActive, prometheus.GaugeValue, float64(m.Active), tier, m.ID)
	if m.MaxConcurrency != nil {
		ch <- prometheus.MustNewConstMetric(c.memberMax, prometheus.GaugeValue, float64(*m.MaxConcurrency), tier, m.ID)
	}
	ch <- prometheus.MustNewConstMetric(c.memberReady, prometheus.GaugeValue, boolValue(m.Ready), tier, m.ID)
	if p := m.Pressure; p != nil {
		known := false
		for _, f := range freshnessClasses {
			known = known || p.Freshness == f.String()
		}
		if known {
			for _, f := range freshnessClasses {
				ch <- prometheus.MustNewConstMetric(c.memberFreshness, prometheus.GaugeValue,
					boolValue(p.Freshness == f.String()), tier, m.ID, f.String())
			}
		}
		if p.PPM != nil && p.Freshness == scheduler.FreshnessFresh.String() {
			ch <- prometheus.MustNewConstMetric(c.memberPPM, prometheus.GaugeValue, float64(*p.PPM), tier, m.ID)
		}
	}
	if target, ok := targets[m.ID]; ok {
		if at, ok := c.fetches.completedAt(target); ok {
			ch <- prometheus.MustNewConstMetric(c.memberPressureAge, prometheus.GaugeValue,
				max(now.Sub(at).Seconds(), 0), tier, m.ID)
		}
	}
}

// boolValue is 1 for true and 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
