package tiers

import (
	"errors"
	"fmt"
)

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is. Their text is what the admin
// API and the status report of a refused configuration say, so it keeps
// the words the router has always used.
var (
	// ErrInvalidTier is recorded on the admin API for a tier the Set could
	// not apply; it keeps serving the tier's previous configuration, if any.
	ErrInvalidTier = errors.New("router: tier cannot be applied")
	// ErrMemberNotLocal wraps ErrInvalidTier for a tier with memberLocality
	// SameHost that names a member whose endpoint host is neither loopback
	// nor an address of this host.
	ErrMemberNotLocal = fmt.Errorf("%w", ErrInvalidTier)
)
