package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/router"
)

// RequestMetrics holds the per-request metrics: sluice_requests_total
// {tier,member,outcome}, sluice_admission_refusals_total{tier,reason},
// sluice_schedule_duration_seconds{tier},
// sluice_upstream_first_byte_seconds{tier,member},
// sluice_stream_outcomes_total{tier,member,outcome},
// sluice_member_ejections_total{tier,member,reason} and
// sluice_member_protocol_errors_total{tier,member,reason}. It is a router.Recorder
// (Record is called once per request) and a prometheus.Collector. Label
// values are tier keys and member ids from the configuration and the
// router's closed outcome and code sets; a request refused before alias
// resolution has empty tier and member. All methods are safe for
// concurrent use.
type RequestMetrics struct {
	requests  *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	schedule  *prometheus.HistogramVec
	firstByte *prometheus.HistogramVec
	ejections *prometheus.CounterVec
	protocol  *prometheus.CounterVec
	streams   *prometheus.CounterVec

	// children caches the series of each label combination seen, so that
	// Record neither hashes labels nor allocates once a combination is
	// known. Combinations are bounded by the configuration.
	mu       sync.RWMutex
	children map[seriesKey]*series
}

// seriesKey identifies the series one request updates: code is set for
// requests not admitted, end for admitted ones.
type seriesKey struct {
	tier, member, outcome, code, end string
}

// series are the metrics one label combination updates.
type series struct {
	requests  prometheus.Counter
	refusals  prometheus.Counter // nil unless not admitted.
	schedule  prometheus.Observer
	firstByte prometheus.Observer // nil unless admitted.
	stream    prometheus.Counter  // nil unless admitted.
}

// NewRequestMetrics returns the request metrics, all at zero.
func NewRequestMetrics() *RequestMetrics {
	return &RequestMetrics{
		children: map[seriesKey]*series{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameRequests,
			Help: "Inference requests by tier, member and outcome (admitted, not_admitted, refused).",
		}, []string{labelTier, labelMember, labelOutcome}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameRefusals,
			Help: "Requests the tier's admission owner refused, by reason (capacity_exhausted, tier_quiesced, no_eligible_member).",
		}, []string{labelTier, labelReason}),
		schedule: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameScheduleDuration,
			Help:    "Time to build a request's admission inputs and make its Acquire, in seconds.",
			Buckets: scheduleBuckets,
		}, []string{labelTier}),
		firstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameFirstByte,
			Help:    "Time from the start of the upstream attempt to the member's response headers, in seconds.",
			Buckets: firstByteBuckets,
		}, []string{labelTier, labelMember}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameEjections,
			Help: "Members taken out of selection until a readiness probe passes, by reason (connection_refused, connection_reset, connection_closed).",
		}, []string{labelTier, labelMember, labelReason}),
		protocol: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameProtocolErrors,
			Help: "Exchanges a member ended by breaking the HTTP protocol before its response headers (answered 502 upstream_unavailable), by reason (response_head_too_large, too_many_informational, switching_protocols).",
		}, []string{labelTier, labelMember, labelReason}),
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameStreamOutcomes,
			Help: "Admitted requests by how their one upstream exchange ended (complete, truncated, malformed, upstream_unavailable, header_timeout, idle_timeout, upstream_error, client_gone, aborted).",
		}, []string{labelTier, labelMember, labelOutcome}),
	}
}

// Record implements router.Recorder.
func (m *RequestMetrics) Record(o router.Outcome) {
	key := seriesKey{tier: o.Tier, member: o.Member, outcome: string(o.Result)}
	switch o.Result {
	case router.ResultNotAdmitted:
		key.code = o.Code
	case router.ResultAdmitted:
		key.end = string(o.End)
	}
	s := m.series(key)
	s.requests.Inc()
	if s.refusals != nil {
		s.refusals.Inc()
	}
	if s.schedule != nil {
		s.schedule.Observe(o.Schedule.Seconds())
	}
	if s.stream != nil {
		s.stream.Inc()
	}
	if s.firstByte != nil && o.FirstByte > 0 {
		s.firstByte.Observe(max(o.FirstByte-o.Dispatch, 0).Seconds())
	}
	if o.Ejection != "" {
		// Rare, and only after a failed attempt: the label lookup is not
		// cached.
		m.ejections.WithLabelValues(o.Tier, o.Member, string(o.Ejection)).Inc()
	}
	if o.ProtocolError != "" {
		// Rarer still: not cached either.
		m.protocol.WithLabelValues(o.Tier, o.Member, string(o.ProtocolError)).Inc()
	}
}

// series returns the cached series of key, creating them once.
func (m *RequestMetrics) series(key seriesKey) *series {
	m.mu.RLock()
	s, ok := m.children[key]
	m.mu.RUnlock()
	if ok {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.children[key]; ok {
		return s
	}
	s = &series{requests: m.requests.WithLabelValues(key.tier, key.member, key.outcome)}
	switch router.Result(key.outcome) {
	case router.ResultNotAdmitted:
		s.refusals = m.refusals.WithLabelValues(key.tier, key.code)
		s.schedule = m.schedule.WithLabelValues(key.tier)
	case router.ResultAdmitted:
		s.schedule = m.schedule.WithLabelValues(key.tier)
		s.firstByte = m.firstByte.WithLabelValues(key.tier, key.member)
		s.stream = m.streams.WithLabelValues(key.tier, key.member, key.end)
	}
	m.children[key] = s
	return s
}

// Describe implements prometheus.Collector.
func (m *RequestMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.refusals.Describe(ch)
	m.schedule.Describe(ch)
	m.firstByte.Describe(ch)
	m.ejections.Describe(ch)
	m.protocol.Describe(ch)
	m.streams.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *RequestMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.refusals.Collect(ch)
	m.schedule.Collect(ch)
	m.firstByte.Collect(ch)
	m.ejections.Collect(ch)
	m.protocol.Collect(ch)
	m.streams.Collect(ch)
}
