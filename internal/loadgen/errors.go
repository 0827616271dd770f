package loadgen

import "errors"

// Sentinel errors returned by this package, checked with errors.Is.
var (
	// ErrInvalidConfig reports a Config that Validate rejects; the wrapping
	// error names the field.
	ErrInvalidConfig = errors.New("loadgen: invalid config")
)
