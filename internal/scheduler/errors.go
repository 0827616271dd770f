package scheduler

import "errors"

// The fixed errors of the package. Rank and Validate return exactly these
// values, never wrapped, so callers compare them with errors.Is.
var (
	// ErrInvalidMembership is returned when the membership is not 2..16
	// valid member ids in strictly ascending order.
	ErrInvalidMembership = errors.New("scheduler: membership must be 2..16 valid member ids, sorted and unique")
	// ErrInvalidCursor is returned when the cursor is outside 0..N-1 for a
	// membership of N members.
	ErrInvalidCursor = errors.New("scheduler: cursor outside the membership")
	// ErrInvalidCandidates is returned when the candidate list is not 2..16
	// distinct members of the membership.
	ErrInvalidCandidates = errors.New("scheduler: candidates must be 2..16 distinct members of the membership")
	// ErrInvalidCandidate is returned when a candidate's active count or
	// capacity is outside its bounds.
	ErrInvalidCandidate = errors.New("scheduler: candidate count or capacity out of bounds")
	// ErrInvalidPressure is returned when a Pressure is not a value Normalize
	// can produce: an unknown class or state, a PPM out of bounds, or a PPM
	// on a pressure that is not fresh.
	ErrInvalidPressure = errors.New("scheduler: malformed pressure")
	// ErrInvalidDecision is returned when a Decision is not a value Rank can
	// produce.
	ErrInvalidDecision = errors.New("scheduler: inconsistent decision")
)
