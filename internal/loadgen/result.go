package loadgen

import (
	"time"
)

// ErrorKind classifies a request that did not succeed.
type ErrorKind string

// The failure kinds. A request counts under exactly one of them or as
// succeeded.
const (
	// ErrorStatus is a response with a status outside 2xx; the status is
	// also counted in Result.Statuses.
	ErrorStatus ErrorKind = "status"
	// ErrorTransport is a request that got no response: connection refused
	// or reset, or the connection failed before the response headers.
	ErrorTransport ErrorKind = "transport"
	// ErrorStream is a 2xx response whose body broke off: a read error, or
	// a stream that ended without its terminal event ([DONE] or
	// response.completed), or a Responses stream that reported a failure.
	ErrorStream ErrorKind = "stream"
	// ErrorMalformed is a 2xx response with an event or body that is not
	// the JSON the API defines.
	ErrorMalformed ErrorKind = "malformed"
	// ErrorTimeout is a request that outlived Config.RequestTimeout.
	ErrorTimeout ErrorKind = "timeout"
	// ErrorCanceled is a request still in flight when the run's context
	// ended.
	ErrorCanceled ErrorKind = "canceled"
)

// Result is what a run measured. Only requests that succeeded contribute
// to the latency distributions; every request counts in Sent and under
// either Succeeded or one ErrorKind.
type Result struct {
	// Mode is the schedule that ran.
	Mode Mode
	// Elapsed is the time from the start of the run to the end of its last
	// request.
	Elapsed time.Duration
	// Sent is the number of requests sent.
	Sent int
	// Succeeded is the number of 2xx responses read completely: a stream
	// up to its terminal event, a body that is valid JSON.
	Succeeded int
	// Dropped is the number of open-loop arrivals that were not sent
	// because Concurrency requests were in flight.
	Dropped int
	// Statuses counts responses by HTTP status (requests without a response
	// are not counted here; see Errors).
	Statuses map[int]int
	// Errors counts the requests that did not succeed, by kind.
	Errors map[ErrorKind]int
	// HeaderCounts counts the values of Config.CountHeader over every
	// response that carried it, whatever its status.
	HeaderCounts map[string]int
	// HeaderE2E holds, per value of Config.CountHeader, the end-to-end
	// latency of the requests that succeeded with it (such as the latency
	// of each router member).
	HeaderE2E map[string]*Distribution
	// Tokens is the number of output tokens received: token events of
	// streams, the usage's output tokens of non-streaming responses, over
	// the requests that succeeded.
	Tokens int
	// TTFT is the time from sending a request to its first token (streams
	// only).
	TTFT Distribution
	// ITL is the time between consecutive tokens of a stream.
	ITL Distribution
	// E2E is the time from sending a request to the end of its response.
	E2E Distribution
}

// Failed returns the number of requests that did not succeed.
func (r *Result) Failed() int {
	n := 0
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// Throughput returns the succeeded requests per second of Elapsed.
func (r *Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Succeeded) / r.Elapsed.Seconds()
}

// requestResult is one request's outcome, handed from the request's
// goroutine to the aggregator.
type requestResult struct {
	status  int // 0 without a response
	failure ErrorKind
	header  string
	tokens  int
	e2e     time.Duration
	ttft    time.Duration // < 0 when no token arrived
	itl     []time.Duration
}
