package router

import (
	"errors"
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
)

// Internal errors.
var (
	// errNoRoute reports a lease whose member has no route in the tier's
	// configuration, which cannot happen.
	errNoRoute = errors.New("router: leased member has no route")
)
