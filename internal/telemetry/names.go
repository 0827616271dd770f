package telemetry

import "github.com/prometheus/client_golang/prometheus"

// The metric names.
const (
	nameTierActive               = "sluice_tier_active_requests"
	nameTierMax                  = "sluice_tier_max_concurrency"
	nameMemberActive             = "sluice_member_active_requests"
	nameMemberMax                = "sluice_member_max_concurrency"
	nameMemberPPM                = "sluice_member_pressure_ppm"
	nameMemberFreshness          = "sluice_member_pressure_freshness"
	nameMemberReady              = "sluice_member_ready"
	nameRequests                 = "sluice_requests_total"
	nameRefusals                 = "sluice_admission_refusals_total"
	nameScheduleDuration         = "sluice_schedule_duration_seconds"
	nameFirstByte                = "sluice_upstream_first_byte_seconds"
	nameEjections                = "sluice_member_ejections_total"
	nameProtocolErrors           = "sluice_member_protocol_errors_total"
	nameStreamOutcomes           = "sluice_stream_outcomes_total"
	namePressureFetches          = "sluice_pressure_fetch_total"
	namePressureAge              = "sluice_pressure_age_seconds"
	nameDecisionLogDropped       = "sluice_decision_log_dropped_total"
	nameSchedulerEvidenceDropped = "sluice_decision_scheduler_evidence_dropped_total"
	nameBodyBuffered             = "sluice_request_body_buffered_bytes"
	nameBodyBufferLimit          = "sluice_request_body_buffer_limit_bytes"
	nameFirstToken               = "sluice_time_to_first_token_seconds" //nolint:gosec // a metric name, not a credential.
	nameInterToken               = "sluice_inter_token_latency_seconds" //nolint:gosec // a metric name.
	nameRequestDuration          = "sluice_request_duration_seconds"
	nameTokens                   = "sluice_tokens_total" //nolint:gosec // a metric name.
	nameFrontDoorConnections     = "sluice_front_door_connections"
	nameFrontDoorUnauthenticated = "sluice_front_door_unauthenticated_connections"
	nameFrontDoorClosed          = "sluice_front_door_connections_closed_total"
	nameQueueWaiting             = "sluice_queue_waiting_requests"
	nameQueueMax                 = "sluice_queue_max_requests"
	nameQueueOldestWait          = "sluice_queue_oldest_wait_seconds"
	nameQueueWait                = "sluice_queue_wait_seconds"
	nameQueueOutcomes            = "sluice_queue_outcomes_total"
)

// The label names; no other label is used.
const (
	labelTier      = "tier"
	labelMember    = "member"
	labelOutcome   = "outcome"
	labelReason    = "reason"
	labelFreshness = "freshness"
	labelResult    = "result"
	labelKind      = "kind"
)

// The values of the kind label of sluice_tokens_total.
const (
	kindPrompt     = "prompt"
	kindCompletion = "completion"
)

// scheduleBuckets are the buckets of sluice_schedule_duration_seconds:
// 1 µs to 16 ms by factors of 4. An Acquire over 16 members takes about a
// microsecond; the upper buckets catch lock contention.
var scheduleBuckets = prometheus.ExponentialBuckets(1e-6, 4, 8)

// firstByteBuckets are the buckets of sluice_upstream_first_byte_seconds:
// 5 ms to 120 s, the default response header timeout. Time to first token
// of a loaded engine runs from milliseconds to tens of seconds.
var firstByteBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// firstTokenBuckets are the buckets of sluice_time_to_first_token_seconds:
// 10 ms to 120 s. A short prompt on an idle engine answers in tens of
// milliseconds; a long prefill or a queue behind a full batch takes
// seconds to minutes.
var firstTokenBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 20, 30, 60, 120}

// interTokenBuckets are the buckets of sluice_inter_token_latency_seconds:
// 1 ms to 2.5 s, dense between 10 and 100 ms where decode steps of
// batched engines fall. 0 (events relayed in one read) lands in the first.
var interTokenBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}

// requestDurationBuckets are the buckets of sluice_request_duration_seconds:
// 50 ms to 30 min. A generation lasts from a fraction of a second to many
// minutes for long outputs.
var requestDurationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800}

// queueWaitBuckets are the buckets of sluice_queue_wait_seconds: 1 ms to
// 10 min, the largest maxWait a queue accepts. A waiter is admitted the
// instant a lease is released, so most waits are a fraction of one
// generation (milliseconds to tens of seconds); the upper buckets show
// waits that run into maxWait.
var queueWaitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
