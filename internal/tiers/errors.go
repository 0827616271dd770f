package tiers

import (
	"errors"
	"fmt"
)

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
//
// ErrInvalidTier's text begins the message of a refused configuration on
// the admin API and in the ReplicaTier's status.router.applyError
// (docs/KUBERNETES.md#4-router-status-internalstatus). That message is
// published, so it names the router, the program that refuses the tier,
// rather than this package.
var (
	// ErrInvalidTier is recorded on the admin API for a tier the Set could
	// not apply; it keeps serving the tier's previous configuration, if any.
	ErrInvalidTier = errors.New("router: tier cannot be applied")
	// ErrMemberNotLocal wraps ErrInvalidTier for a tier with memberLocality
	// SameHost that names a member whose endpoint host is neither loopback
	// nor an address of this host.
	ErrMemberNotLocal = fmt.Errorf("%w", ErrInvalidTier)
)
