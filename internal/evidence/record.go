package evidence

import (
	"slices"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// Outcome is the admission outcome of a request, the record's "outcome".
type Outcome string

// The closed set of Outcome values. They are the router's Result values.
const (
	// OutcomeAdmitted means a lease was acquired and exactly one upstream
	// attempt was made.
	OutcomeAdmitted Outcome = "admitted"
	// OutcomeNotAdmitted means the tier's admission owner refused the
	// request (capacity exhausted, tier quiesced, no eligible member): no
	// lease, no attempt.
	OutcomeNotAdmitted Outcome = "not_admitted"
	// OutcomeRefused means a request-wide gate refused the request before
	// admission: no lease, no attempt.
	OutcomeRefused Outcome = "refused"
)

// StreamOutcome says how an admitted request's single upstream exchange
// ended, the attempt's "stream_outcome". The values are the router's End
// values.
type StreamOutcome string

// The closed set of StreamOutcome values.
const (
	// StreamComplete means the member's response was relayed to its end
	// (for a 2xx text/event-stream response: well framed, with data:
	// [DONE]).
	StreamComplete StreamOutcome = "complete"
	// StreamTruncated means the member ended the body early without a
	// connection error: shorter than its Content-Length, without its
	// terminating chunk, or a 2xx event stream without data: [DONE].
	StreamTruncated StreamOutcome = "truncated"
	// StreamMalformed means a 2xx event stream broke the event-stream
	// framing; it was relayed whole.
	StreamMalformed StreamOutcome = "malformed"
	// StreamUpstreamUnavailable means the member failed before the client
	// was sent anything (before response headers, or before the first body
	// byte of a response of known length); the client got 502
	// upstream_unavailable.
	StreamUpstreamUnavailable StreamOutcome = "upstream_unavailable"
	// StreamHeaderTimeout means the member's response did not start in
	// time (no headers, or no first body byte of a response of known
	// length); the client got 504 upstream_timeout.
	StreamHeaderTimeout StreamOutcome = "header_timeout"
	// StreamIdleTimeout means the response body stalled; the client's
	// response was aborted.
	StreamIdleTimeout StreamOutcome = "idle_timeout"
	// StreamUpstreamError means the member's body failed mid-way.
	StreamUpstreamError StreamOutcome = "upstream_error"
	// StreamClientGone means the client went away first.
	StreamClientGone StreamOutcome = "client_gone"
	// StreamAborted means relaying to the client failed for another reason.
	StreamAborted StreamOutcome = "aborted"
)

// StreamOutcomes is the closed set of StreamOutcome values, in the order
// the documentation lists them. Read it, never change it.
var StreamOutcomes = []StreamOutcome{StreamComplete, StreamTruncated, StreamMalformed, StreamUpstreamUnavailable,
	StreamHeaderTimeout, StreamIdleTimeout, StreamUpstreamError, StreamClientGone, StreamAborted}

// valid reports whether s is in the closed set.
func (s StreamOutcome) valid() bool { return slices.Contains(StreamOutcomes, s) }

// Ejection says why an admitted request's exchange took its member out of
// selection until a readiness probe passes again, the attempt's
// "ejection". The values are the router's Ejection values.
type Ejection string

// The closed set of Ejection values; a record without an ejection has the
// empty value.
const (
	// EjectionRefused means the member refused the connection.
	EjectionRefused Ejection = "connection_refused"
	// EjectionReset means the member reset a fresh connection before any
	// response byte.
	EjectionReset Ejection = "connection_reset"
	// EjectionClosed means the member closed the connection after taking
	// the request, before any response byte.
	EjectionClosed Ejection = "connection_closed"
)

// Ejections is the closed set of Ejection values. Read it, never change it.
var Ejections = []Ejection{EjectionRefused, EjectionReset, EjectionClosed}

// valid reports whether e is in the closed set.
func (e Ejection) valid() bool { return slices.Contains(Ejections, e) }

// ProtocolError says how an admitted request's member broke the HTTP
// protocol before its response headers (the exchange ended as 502
// upstream_unavailable); empty when it did not. It is the attempt's
// "protocol_error". The values are the router's ProtocolError values.
type ProtocolError string

// The closed set of ProtocolError values; a record without one has the
// empty value.
const (
	// ProtocolHeadTooLarge means the member's response heads exceeded the
	// router's bound.
	ProtocolHeadTooLarge ProtocolError = "response_head_too_large"
	// ProtocolTooManyInformational means the member sent more 1xx
	// responses than the router reads.
	ProtocolTooManyInformational ProtocolError = "too_many_informational"
	// ProtocolSwitchingProtocols means the member answered 101.
	ProtocolSwitchingProtocols ProtocolError = "switching_protocols"
)

// ProtocolErrors is the closed set of ProtocolError values. Read it, never
// change it.
var ProtocolErrors = []ProtocolError{ProtocolHeadTooLarge, ProtocolTooManyInformational, ProtocolSwitchingProtocols}

// valid reports whether p is in the closed set.
func (p ProtocolError) valid() bool { return slices.Contains(ProtocolErrors, p) }

// QueueOutcome says how a request that met its tier's admission queue left
// it, the record's "queue" (docs/ADMISSION-QUEUE.md). A record of a request
// that never met the queue (admitted at once, refused before admission, or
// its tier has no queue) has the empty value. The values are the router's
// QueueEnd values.
type QueueOutcome string

// The closed set of QueueOutcome values.
const (
	// QueueAdmitted means the request waited, then a member admitted it.
	QueueAdmitted QueueOutcome = "admitted"
	// QueueTimeout means the request waited the queue's maxWait and got
	// 503 queue_timeout.
	QueueTimeout QueueOutcome = "queue_timeout"
	// QueueFull means the queue, or its tenant's share, was full when the
	// request arrived or after a reconfiguration lowered the bounds; it got
	// 429 queue_full.
	QueueFull QueueOutcome = "queue_full"
	// QueueClientGone means the client left while the request waited: no
	// response, no lease.
	QueueClientGone QueueOutcome = "client_gone"
	// QueueRefused means the tier stopped admitting while the request
	// waited (quiesced, handed over, no eligible member, queue removed) and
	// it got that refusal.
	QueueRefused QueueOutcome = "refused"
)

// QueueOutcomes is the closed set of QueueOutcome values, in the order the
// documentation lists them. Read it, never change it.
var QueueOutcomes = []QueueOutcome{QueueAdmitted, QueueTimeout, QueueFull, QueueClientGone, QueueRefused}

// valid reports whether q is in the closed set.
func (q QueueOutcome) valid() bool { return slices.Contains(QueueOutcomes, q) }

// The router error codes a record carries as its refusal reason or, for an
// admitted request the router answered itself, as the code of its line.
const (
	// CodeInvalidRequestBody is a gate refusal: not a JSON object with a
	// string model.
	CodeInvalidRequestBody = "invalid_request_body"
	// CodeInvalidAPIKey is a gate refusal: missing or wrong API key.
	CodeInvalidAPIKey = "invalid_api_key"
	// CodeModelNotFound is a gate refusal: unknown alias.
	CodeModelNotFound = "model_not_found"
	// CodeMethodNotAllowed is a gate refusal: not POST.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeRequestTooLarge is a gate refusal: body above the limit.
	CodeRequestTooLarge = "request_too_large"
	// CodeBodyBufferExhausted is a gate refusal, the one answered 503: the
	// router's budget of buffered request bodies cannot hold the body.
	CodeBodyBufferExhausted = "body_buffer_exhausted"
	// CodeCapacityExhausted is an admission refusal: the tier or every
	// eligible member is at its ceiling.
	CodeCapacityExhausted = "capacity_exhausted"
	// CodeTierQuiesced is an admission refusal: the tier is quiesced.
	CodeTierQuiesced = "tier_quiesced"
	// CodeNoEligibleMember is an admission refusal: no member is ready and
	// admitting.
	CodeNoEligibleMember = "no_eligible_member"
	// CodeQueueFull is a queue refusal, answered 429: the tier's queue, or
	// the tenant's share of it, is full.
	CodeQueueFull = "queue_full"
	// CodeQueueTimeout is a queue refusal: the request waited the queue's
	// maxWait.
	CodeQueueTimeout = "queue_timeout"
	// CodeRouterHandedOver is a queue refusal: the router handed the tier's
	// admission over to its successor while the request waited.
	CodeRouterHandedOver = "router_handed_over"
	// CodeClientGone is the code of a request whose client left while it
	// waited in the queue; it got no response (status 499).
	CodeClientGone = "client_gone"
	// CodeUpstreamUnavailable is the router's 502 for an admitted request
	// whose member failed before response headers.
	CodeUpstreamUnavailable = "upstream_unavailable"
	// CodeUpstreamTimeout is the router's 504 for an admitted request whose
	// member sent no response headers in time.
	CodeUpstreamTimeout = "upstream_timeout"
)

// gateCode reports whether code is a gate refusal reason.
func gateCode(code string) bool {
	switch code {
	case CodeInvalidRequestBody, CodeInvalidAPIKey, CodeModelNotFound, CodeMethodNotAllowed, CodeRequestTooLarge,
		CodeBodyBufferExhausted:
		return true
	}
	return false
}

// gateStatus reports whether status is the one a gate refusal with code
// answers: 503 for body_buffer_exhausted, a 4xx for the others.
func gateStatus(code string, status int) bool {
	if code == CodeBodyBufferExhausted {
		return status == 503
	}
	return StatusClass(status) == "4xx"
}

// AdmissionCodes is the closed set of admission refusal reasons. Read it,
// never change it.
var AdmissionCodes = []string{CodeCapacityExhausted, CodeTierQuiesced, CodeNoEligibleMember}

// admissionCode reports whether code is an admission refusal reason.
func admissionCode(code string) bool { return slices.Contains(AdmissionCodes, code) }

// QueueCodes is the closed set of the codes of not-admitted requests that
// met the queue beyond AdmissionCodes. Read it, never change it.
var QueueCodes = []string{CodeQueueFull, CodeQueueTimeout, CodeRouterHandedOver, CodeClientGone}

// notAdmittedConsistent reports whether a not-admitted record's code,
// status and queue outcome agree as the router writes them: each queue code
// with its own outcome and status, and an admission refusal with 503 and
// either no queue or a refusal while queued.
func notAdmittedConsistent(code string, status int, q QueueOutcome) bool {
	switch code {
	case CodeQueueFull:
		return q == QueueFull && status == 429
	case CodeQueueTimeout:
		return q == QueueTimeout && status == 503
	case CodeClientGone:
		return q == QueueClientGone && status == 499
	case CodeRouterHandedOver:
		return q == QueueRefused && status == 503
	}
	return admissionCode(code) && (q == "" || q == QueueRefused) && status == 503
}

// Record is one inference request's decision record. It carries ids,
// enums, counts and timings only. The fields mirror the router's Outcome;
// the JSON form (MarshalJSON) groups the attempt fields into "attempts".
type Record struct {
	// RequestID is the X-Request-Id the client got.
	RequestID string
	// Time is when the router received the request.
	Time time.Time
	// Duration is from Time to the end of the request.
	Duration time.Duration
	// Alias is the model alias the request named; empty when a gate refused
	// the request before alias resolution.
	Alias string
	// Tier is the tier's namespace/name; empty when unresolved.
	Tier string
	// Outcome is the admission outcome.
	Outcome Outcome
	// Code is the router's error code: the refusal reason of refused and
	// not-admitted requests (client_gone for a client that left while
	// queued), upstream_unavailable or upstream_timeout for an
	// admitted request the router answered with 502 or 504, empty
	// otherwise.
	Code string
	// Status is the HTTP status the client got (499 when it left before
	// response headers).
	Status int
	// Member is the leased member; empty unless admitted.
	Member string
	// Dispatch is from Time to the start of the upstream attempt (gates and
	// admission); zero unless admitted.
	Dispatch time.Duration
	// FirstByte is from Time to the member's response headers; zero when
	// none arrived.
	FirstByte time.Duration
	// End is how the upstream exchange ended; empty unless admitted.
	End StreamOutcome
	// Ejection says why the exchange ejected its member; empty when it did
	// not. Only an upstream_unavailable attempt ejects.
	Ejection Ejection
	// Protocol says how the member broke the protocol before response
	// headers; empty when it did not.
	Protocol ProtocolError
	// Queued is how long the request waited in its tier's admission queue;
	// zero when it did not wait. It is part of the record only with Queue.
	Queued time.Duration
	// Queue is how the request left its tier's admission queue; empty when
	// it never met the queue.
	Queue QueueOutcome
	// Scheduler is the Capacity lease's captured decision, nil for every
	// other record. The record owns it: nobody may change it after the
	// record is built.
	Scheduler *scheduler.Decision
}

// SchedulerValid reports whether r carries a scheduler payload every
// surface accepts: the record is admitted, the decision selected r.Member
// with reason selected, the decision passes scheduler.Decision.Validate (at
// most 16 rows, the selected member is the first row, eligible ids sorted
// and unique, as many rows as eligible ids, each row's member eligible,
// ranks unique and in range, freshness and PPM agree, rows in rank order),
// and no member has two rows, so rows and eligible ids match one to one.
func (r *Record) SchedulerValid() bool {
	d := r.Scheduler
	return d != nil && r.Outcome == OutcomeAdmitted && d.Reason == scheduler.ReasonSelected &&
		d.SelectedMemberID == r.Member && d.Validate() == nil && distinctRows(d)
}

// distinctRows reports whether every score row names a different eligible
// member. Validate checks each row's member is eligible and the counts
// match, not that no member appears twice. d must pass Validate.
func distinctRows(d *scheduler.Decision) bool {
	var seen uint32 // bit i: EligibleIDs[i] has a row; at most MaxMembers bits.
	for _, s := range d.Scores {
		i, found := slices.BinarySearch(d.EligibleIDs, s.MemberID)
		if !found || seen&(1<<i) != 0 {
			return false
		}
		seen |= 1 << i
	}
	return true
}

// sanitize drops an invalid scheduler payload and reports whether it did.
func (r *Record) sanitize() bool {
	if r.Scheduler != nil && !r.SchedulerValid() {
		r.Scheduler = nil
		return true
	}
	return false
}

// StatusClass returns the class of an HTTP status: "1xx" to "5xx", or
// "none" for a status outside 100..599 (no status).
func StatusClass(status int) string {
	switch {
	case status >= 100 && status < 200:
		return "1xx"
	case status >= 200 && status < 300:
		return "2xx"
	case status >= 300 && status < 400:
		return "3xx"
	case status >= 400 && status < 500:
		return "4xx"
	case status >= 500 && status < 600:
		return "5xx"
	}
	return statusNone
}

// statusNone is the status class of a record without a status.
const statusNone = "none"

// attemptDuration returns the attempt's duration: from dispatch to the end.
func (r *Record) attemptDuration() time.Duration {
	return max(r.Duration-r.Dispatch, 0)
}

// attemptFirstByte returns the attempt's first-byte latency, from dispatch
// to the member's response headers, and false when none arrived.
func (r *Record) attemptFirstByte() (time.Duration, bool) {
	if r.FirstByte <= 0 {
		return 0, false
	}
	return max(r.FirstByte-r.Dispatch, 0), true
}

// UpstreamFirstByte returns the first-byte latency of an admitted record's
// attempt, from dispatch to the member's response headers, and false when
// the record has no attempt or no headers arrived.
func (r *Record) UpstreamFirstByte() (time.Duration, bool) {
	if r.Outcome != OutcomeAdmitted {
		return 0, false
	}
	return r.attemptFirstByte()
}
