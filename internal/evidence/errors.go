package evidence

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrInvalidRecord is returned by ParseRecord for captured JSON that is
	// not a decision record: malformed JSON, an unknown or missing key, a
	// wrong type, an unknown enum string or inconsistent fields outside the
	// scheduler payload. Nothing of the record is kept.
	ErrInvalidRecord = errors.New("evidence: invalid decision record")
	// ErrInvalidScheduler is returned by ParseRecord when only the optional
	// replica_scheduler payload is invalid; the record is returned without
	// it.
	ErrInvalidScheduler = errors.New("evidence: invalid scheduler evidence")
	// ErrInvalidSize is returned by NewLog for a ring size outside
	// 0..MaxLogSize.
	ErrInvalidSize = errors.New("evidence: decision log size out of range")
	// ErrInvalidSink is returned by OpenFileSink for options it cannot use:
	// an empty path, or a negative size bound or queue size.
	ErrInvalidSink = errors.New("evidence: invalid file sink options")
)
