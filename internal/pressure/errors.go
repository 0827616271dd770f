package pressure

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-dev/sluice/internal/memberhttp"
)

// Errors returned by this package. Collection errors are classified by
// Classify, never retained; the Cache's registration and lookup errors are
// memberpoll's.
var (
	// ErrUnknownEngine reports an engine name no adapter understands.
	ErrUnknownEngine = errors.New("pressure: unknown engine")
	// ErrInvalidSeries reports a named series that is not a selector of
	// bounds.SeriesSelectorPattern within bounds.MaxSeriesSelectorLength.
	ErrInvalidSeries = errors.New("pressure: invalid series selector")
	// ErrParse reports an exposition that is not valid Prometheus text format.
	ErrParse = errors.New("pressure: metrics exposition does not parse")
	// ErrMissingSeries reports an exposition without any of the engine's
	// pressure series.
	ErrMissingSeries = errors.New("pressure: no pressure series in the exposition")
	// ErrBodyTooLarge reports a metrics body larger than MaxBodyBytes.
	ErrBodyTooLarge = memberhttp.ErrBodyTooLarge
	// ErrTransport reports a metrics request that failed before a complete
	// body arrived.
	ErrTransport = memberhttp.ErrTransport
	// ErrTimeout reports a metrics request that did not finish within
	// FetchTimeout.
	ErrTimeout = memberhttp.ErrTimeout
	// ErrHTTPStatus reports a metrics response whose status is not 2xx.
	ErrHTTPStatus = memberhttp.ErrHTTPStatus
	// ErrInvalidMetricsURL reports a metrics URL that is not an absolute
	// http or https URL with a host.
	ErrInvalidMetricsURL = memberhttp.ErrInvalidURL
	// ErrInvalidCapacity reports a member ceiling outside 1..MaxCapacity.
	ErrInvalidCapacity = errors.New("pressure: member capacity out of range")
)

// Outcome classifies one collection. The values are the result label of
// sluice_pressure_fetch_total (docs/OPERATIONS.md).
type Outcome string

// The closed set of outcomes: a collection that returned telemetry within
// FetchTimeout; that timed out or took longer than FetchTimeout by the
// Cache's clock, whatever it returned; whose connection failed; answered
// with a non-2xx status; whose body exceeded MaxBodyBytes; whose body did
// not parse or has no adapter or valid series; whose exposition lacked the engine's
// pressure series; cancelled because the Cache closed or the member was
// removed; any other failure.
const (
	OutcomeSuccess        Outcome = "success"
	OutcomeTimeout        Outcome = "timeout"
	OutcomeTransportError Outcome = "transport_error"
	OutcomeHTTPError      Outcome = "http_error"
	OutcomeBodyTooLarge   Outcome = "body_too_large"
	OutcomeParseError     Outcome = "parse_error"
	OutcomeMissingSeries  Outcome = "missing_series"
	OutcomeCancelled      Outcome = "cancelled"
	OutcomeError          Outcome = "error"
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{OutcomeSuccess, OutcomeTimeout, OutcomeTransportError, OutcomeHTTPError,
	OutcomeBodyTooLarge, OutcomeParseError, OutcomeMissingSeries, OutcomeCancelled, OutcomeError}

// Classify returns the outcome of a collection that returned err after
// elapsed by the Cache's clock (docs/PRESSURE.md#classification).
func Classify(err error, elapsed time.Duration) Outcome {
	switch {
	case errors.Is(err, context.Canceled):
		return OutcomeCancelled
	case elapsed > FetchTimeout, errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case err == nil:
		return OutcomeSuccess
	case errors.Is(err, ErrHTTPStatus):
		return OutcomeHTTPError
	case errors.Is(err, ErrTransport):
		return OutcomeTransportError
	case errors.Is(err, ErrBodyTooLarge):
		return OutcomeBodyTooLarge
	case errors.Is(err, ErrParse), errors.Is(err, ErrUnknownEngine), errors.Is(err, ErrInvalidSeries):
		return OutcomeParseError
	case errors.Is(err, ErrMissingSeries):
		return OutcomeMissingSeries
	}
	return OutcomeError
}

// unreadable reports whether the engine answered in time but without
// pressure this package can read: the sample is then unknown, not failed.
func (o Outcome) unreadable() bool {
	return o == OutcomeBodyTooLarge || o == OutcomeParseError || o == OutcomeMissingSeries
}
