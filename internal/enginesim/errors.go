package enginesim

import "errors"

// Sentinel errors returned by this package, checked with errors.Is.
var (
	// ErrInvalidConfig reports a Config that Validate rejects; the wrapping
	// error names the field.
	ErrInvalidConfig = errors.New("enginesim: invalid config")
	// ErrUnknownFlavor reports a metrics flavor that is not one of Flavors.
	ErrUnknownFlavor = errors.New("enginesim: unknown metrics flavor")
	// ErrUnknownStallPoint reports a stall point other than before-headers or
	// after-first-chunk.
	ErrUnknownStallPoint = errors.New("enginesim: unknown stall point")
	// ErrInvalidStall reports a stall that is neither a non-negative duration
	// nor "forever".
	ErrInvalidStall = errors.New("enginesim: invalid stall")
	// ErrUnknownFault reports an X-Enginesim-Fault header value that names
	// no fault, or a request with several such headers.
	ErrUnknownFault = errors.New("enginesim: unknown fault")
)
