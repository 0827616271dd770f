package status

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrInvalidOptions is returned by NewReporter for options that cannot
	// work: no writer, view or node name.
	ErrInvalidOptions = errors.New("status: invalid options")
	// ErrTierGone is wrapped by a Writer when the tier no longer exists;
	// the Reporter does not retry it until the tier's report changes.
	ErrTierGone = errors.New("status: tier not found")
)
