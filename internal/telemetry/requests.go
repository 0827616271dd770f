package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// The closed label domains RequestMetrics.Configure exports at zero are
// the decision record's (evidence.AdmissionCodes, StreamOutcomes,
// Ejections, ProtocolErrors, QueueOutcomes), whose values are the
// router's.

// RequestMetrics holds the per-request metrics: sluice_requests_total
// {tier,member,outcome}, sluice_admission_refusals_total{tier,reason},
// sluice_schedule_duration_seconds{tier},
// sluice_upstream_first_byte_seconds{tier,member},
// sluice_stream_outcomes_total{tier,member,outcome},
// sluice_member_ejections_total{tier,member,reason},
// sluice_member_protocol_errors_total{tier,member,reason},
// sluice_time_to_first_token_seconds{tier,member},
// sluice_inter_token_latency_seconds{tier,member},
// sluice_request_duration_seconds{tier,member,outcome},
// sluice_tokens_total{tier,member,kind},
// sluice_queue_outcomes_total{tier,reason} and
// sluice_queue_wait_seconds{tier}. It is a router.Recorder (Record is
// called once per request), a router.IntervalRecorder and a
// prometheus.Collector. Label
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
	// firstToken, interToken, duration and tokens are the latency and
	// token metrics of admitted requests.
	firstToken *prometheus.HistogramVec
	interToken *prometheus.HistogramVec
	duration   *prometheus.HistogramVec
	tokens     *prometheus.CounterVec
	// queueOutcomes and queueWait are the admission queue's metrics of
	// requests that met it.
	queueOutcomes *prometheus.CounterVec
	queueWait     *prometheus.HistogramVec

	// children caches the series of each label combination seen, so that
	// Record neither hashes labels nor allocates once a combination is
	// known. Combinations are bounded by the configuration.
	mu       sync.RWMutex
	children map[seriesKey]*series
	// intervals caches the inter-token latency series of each tier and
	// member the router asked for.
	intervals map[[2]string]prometheus.Observer
	// queues caches the queue series of each tier and queue outcome seen.
	queues map[[2]string]queueSeries
	// configured are the tiers and their members of the last Configure.
	configured map[string]map[string]bool
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
	firstByte prometheus.Observer // nil unless admitted, as the rest.
	stream    prometheus.Counter
	// firstToken, duration, prompt and completion are the latency and
	// token series of an admitted request.
	firstToken prometheus.Observer
	duration   prometheus.Observer
	prompt     prometheus.Counter
	completion prometheus.Counter
}

// queueSeries are the metrics one request that met its tier's queue
// updates.
type queueSeries struct {
	outcome prometheus.Counter
	wait    prometheus.Observer
}

// NewRequestMetrics returns the request metrics, with the gate refusals'
// series at zero; Configure adds the zero series of each tier and member.
func NewRequestMetrics() *RequestMetrics {
	m := &RequestMetrics{
		children:   map[seriesKey]*series{},
		intervals:  map[[2]string]prometheus.Observer{},
		queues:     map[[2]string]queueSeries{},
		configured: map[string]map[string]bool{},
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
		firstToken: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameFirstToken,
			Help:    "Time from the router's receipt of a request to the first generated content relayed: the first content-bearing event of a 2xx event stream, or the end of a complete 2xx non-streaming body, in seconds.",
			Buckets: firstTokenBuckets,
		}, []string{labelTier, labelMember}),
		interToken: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameInterToken,
			Help:    "Time between consecutive content events of a 2xx event stream as the router read them (0 for events read at once), in seconds.",
			Buckets: interTokenBuckets,
		}, []string{labelTier, labelMember}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameRequestDuration,
			Help:    "Time from the router's receipt of an admitted request to the end of its exchange, by stream outcome, in seconds.",
			Buckets: requestDurationBuckets,
		}, []string{labelTier, labelMember, labelOutcome}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameTokens,
			Help: "Tokens of admitted requests by kind (prompt, completion), from the usage object of the member's response (a non-streaming body, or a stream's usage chunk when the client asked for one).",
		}, []string{labelTier, labelMember, labelKind}),
		queueOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameQueueOutcomes,
			Help: "Requests that met the tier's admission queue, by how they left it (admitted, queue_timeout, queue_full, client_gone, refused).",
		}, []string{labelTier, labelReason}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameQueueWait,
			Help:    "Time requests waited in the tier's admission queue, however they left it (a request refused queue_full on arrival did not wait and is not observed), in seconds.",
			Buckets: queueWaitBuckets,
		}, []string{labelTier}),
	}
	m.series(seriesKey{outcome: string(router.ResultRefused)})
	return m
}

// Configure makes the series of the configuration in force s (each tier
// as tiers.Set.Plan or the applied configuration lists it) match it: every
// counter whose labels the configuration determines is exported, at zero
// until a request counts in it — requests admitted per member and not
// admitted per tier, admission refusals per reason, stream outcomes,
// ejections and protocol errors per member and value, queue outcomes per
// tier and value, and the queue wait histogram per tier — so that rate(),
// histogram_quantile() and absent() work on a fresh router. The series of tiers and members no
// longer configured, histograms included, are deleted; a request that
// ends on one afterwards (a removed tier's last streams) creates its
// series again, and the next Configure deletes them.
func (m *RequestMetrics) Configure(s source.Snapshot) {
	next := make(map[string]map[string]bool, len(s.Tiers))
	for _, t := range s.Tiers {
		members := make(map[string]bool, len(t.Spec.Members))
		for _, mb := range t.Spec.Members {
			members[mb.ID] = true
		}
		next[t.Key] = members
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Everything known, configured before or seen since, that next lacks.
	known := m.configured
	for k := range m.children {
		if k.tier == "" {
			continue // gate refusals: no tier.
		}
		if known[k.tier] == nil {
			known[k.tier] = map[string]bool{}
		}
		if k.member != "" {
			known[k.tier][k.member] = true
		}
	}
	for tier, members := range known {
		if next[tier] == nil {
			m.deleteLocked(prometheus.Labels{labelTier: tier}, func(k seriesKey) bool { return k.tier == tier })
			continue
		}
		for member := range members {
			if !next[tier][member] {
				m.deleteLocked(prometheus.Labels{labelTier: tier, labelMember: member},
					func(k seriesKey) bool { return k.tier == tier && k.member == member })
			}
		}
	}
	for tier, members := range next {
		m.requests.WithLabelValues(tier, "", string(router.ResultNotAdmitted))
		for _, r := range evidence.AdmissionCodes {
			m.refusals.WithLabelValues(tier, r)
		}
		for _, q := range evidence.QueueOutcomes {
			m.queueOutcomes.WithLabelValues(tier, string(q))
		}
		m.queueWait.WithLabelValues(tier)
		for member := range members {
			m.requests.WithLabelValues(tier, member, string(router.ResultAdmitted))
			for _, e := range evidence.StreamOutcomes {
				m.streams.WithLabelValues(tier, member, string(e))
			}
			for _, r := range evidence.Ejections {
				m.ejections.WithLabelValues(tier, member, string(r))
			}
			for _, r := range evidence.ProtocolErrors {
				m.protocol.WithLabelValues(tier, member, string(r))
			}
			m.tokens.WithLabelValues(tier, member, kindPrompt)
			m.tokens.WithLabelValues(tier, member, kindCompletion)
		}
	}
	m.configured = next
}

// deleteLocked deletes the series matching labels from every vector and
// the cached children whose key matches. m.mu is held.
func (m *RequestMetrics) deleteLocked(labels prometheus.Labels, match func(seriesKey) bool) {
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.requests, m.streams, m.ejections, m.protocol, m.firstByte, m.firstToken, m.interToken, m.duration, m.tokens,
	} {
		v.DeletePartialMatch(labels)
	}
	if _, ok := labels[labelMember]; !ok {
		// Tier-only series.
		m.refusals.DeletePartialMatch(labels)
		m.schedule.DeletePartialMatch(labels)
		m.queueOutcomes.DeletePartialMatch(labels)
		m.queueWait.DeletePartialMatch(labels)
		for k := range m.queues {
			if match(seriesKey{tier: k[0]}) {
				delete(m.queues, k)
			}
		}
	}
	for k := range m.children {
		if match(k) {
			delete(m.children, k)
		}
	}
	for k := range m.intervals {
		if match(seriesKey{tier: k[0], member: k[1]}) {
			delete(m.intervals, k)
		}
	}
}

// Intervals implements router.IntervalRecorder: the inter-token latency
// series of tier's member, created once.
func (m *RequestMetrics) Intervals(tier, member string) router.Observer {
	return cached(&m.mu, m.intervals, [2]string{tier, member}, func() prometheus.Observer {
		return m.interToken.WithLabelValues(tier, member)
	})
}

// cached returns the value of k in c, read under mu's read lock, or makes
// it once under the write lock: after the first request of a label
// combination, lookups neither hash labels nor allocate.
func cached[K comparable, V any](mu *sync.RWMutex, c map[K]V, k K, make func() V) V {
	mu.RLock()
	v, ok := c[k]
	mu.RUnlock()
	if ok {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v, ok := c[k]; ok {
		return v
	}
	v = make()
	c[k] = v
	return v
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
	if s.duration != nil {
		s.duration.Observe(o.Duration.Seconds())
		if o.FirstToken > 0 {
			s.firstToken.Observe(o.FirstToken.Seconds())
		}
		if o.HasUsage {
			s.prompt.Add(float64(o.Usage.Prompt))
			s.completion.Add(float64(o.Usage.Completion))
		}
	}
	if o.Queue != "" {
		q := cached(&m.mu, m.queues, [2]string{o.Tier, string(o.Queue)}, func() queueSeries {
			return queueSeries{outcome: m.queueOutcomes.WithLabelValues(o.Tier, string(o.Queue)), wait: m.queueWait.WithLabelValues(o.Tier)}
		})
		q.outcome.Inc()
		if o.Queue != router.QueueFull || o.Queued > 0 {
			q.wait.Observe(o.Queued.Seconds())
		}
	}
	if o.Ejection != "" {
		// Rare, and only after a failed attempt: the label lookup is not
		// cached.
		m.ejections.WithLabelValues(o.Tier, o.Member, string(o.Ejection)).Inc()
	}
	if o.NotSentEjection != "" {
		// The member the request was not sent to before its second
		// admission: as rare, not cached either.
		m.ejections.WithLabelValues(o.Tier, o.NotSentMember, string(o.NotSentEjection)).Inc()
	}
	if o.ProtocolError != "" {
		// Rarer still: not cached either.
		m.protocol.WithLabelValues(o.Tier, o.Member, string(o.ProtocolError)).Inc()
	}
}

// series returns the cached series of key, creating them once.
func (m *RequestMetrics) series(key seriesKey) *series {
	return cached(&m.mu, m.children, key, func() *series {
		s := &series{requests: m.requests.WithLabelValues(key.tier, key.member, key.outcome)}
		switch router.Result(key.outcome) {
		case router.ResultNotAdmitted:
			s.refusals = m.refusals.WithLabelValues(key.tier, key.code)
			s.schedule = m.schedule.WithLabelValues(key.tier)
		case router.ResultAdmitted:
			s.schedule = m.schedule.WithLabelValues(key.tier)
			s.firstByte = m.firstByte.WithLabelValues(key.tier, key.member)
			s.stream = m.streams.WithLabelValues(key.tier, key.member, key.end)
			s.firstToken = m.firstToken.WithLabelValues(key.tier, key.member)
			s.duration = m.duration.WithLabelValues(key.tier, key.member, key.end)
			s.prompt = m.tokens.WithLabelValues(key.tier, key.member, kindPrompt)
			s.completion = m.tokens.WithLabelValues(key.tier, key.member, kindCompletion)
		}
		return s
	})
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
	m.firstToken.Describe(ch)
	m.interToken.Describe(ch)
	m.duration.Describe(ch)
	m.tokens.Describe(ch)
	m.queueOutcomes.Describe(ch)
	m.queueWait.Describe(ch)
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
	m.firstToken.Collect(ch)
	m.interToken.Collect(ch)
	m.duration.Collect(ch)
	m.tokens.Collect(ch)
	m.queueOutcomes.Collect(ch)
	m.queueWait.Collect(ch)
}
