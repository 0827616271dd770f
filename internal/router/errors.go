package router

import (
	"errors"
	"fmt"
)

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrTenantHeader is returned by ParseTenantHeader for a name that is
	// not a header name or names a header that cannot carry a tenant.
	ErrTenantHeader = errors.New("router: invalid tenant header")
	// ErrPassEngineHeader is returned by ParsePassEngineHeaders for a name
	// that is not a header name or not a header the router strips.
	ErrPassEngineHeader = errors.New("router: invalid engine header to pass")
	// ErrInvalidTier is recorded on the admin API for a tier the router could
	// not apply; it keeps serving the tier's previous configuration, if any.
	ErrInvalidTier = errors.New("router: tier cannot be applied")
	// ErrMemberNotLocal wraps ErrInvalidTier for a tier with memberLocality
	// SameHost that names a member whose endpoint host is neither loopback
	// nor an address of this host.
	ErrMemberNotLocal = fmt.Errorf("%w", ErrInvalidTier)
	// ErrHandoverProtocol is returned when the peer sends something the
	// protocol does not allow: a wrong hello, a malformed or oversized
	// message, or a message out of order.
	ErrHandoverProtocol = errors.New("router: handover protocol violation")
	// ErrSuccessorGone is returned by ServeHandover when the successor
	// closed the channel or stopped reading before this router stopped:
	// the tiers admit again.
	ErrSuccessorGone = errors.New("router: successor gone")
	// ErrHandedOverAlready is returned by ServeHandover when a tier's
	// admission is handed over already (another ServeHandover runs).
	ErrHandedOverAlready = errors.New("router: admission handed over already")
	// ErrHandoverRefused is returned by ServeHandover when HandoverGate.Hello
	// refused a successor whose hello was valid: nothing was handed over.
	ErrHandoverRefused = errors.New("router: successor refused")
	// ErrHandoverBounds is returned by AdoptHandover when the predecessor's
	// counts exceed what this router's ceilings allow it to adopt: a
	// snapshot that does is refused whole before anything is adopted, and
	// a later reservation that does ends the handover.
	ErrHandoverBounds = errors.New("router: handover counts above this router's ceilings")
)

// Internal errors.
var (
	// errNoRoute reports a lease whose member has no route in the tier's
	// configuration, which cannot happen.
	errNoRoute = errors.New("router: leased member has no route")
)
