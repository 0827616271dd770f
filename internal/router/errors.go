package router

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrInvalidKeys is returned by ParseKeys and LoadKeys for a key file
	// without keys, with too many keys or with a key that is too long or
	// contains a space.
	ErrInvalidKeys = errors.New("router: invalid key file")
	// ErrInvalidTier is recorded on the admin API for a tier the router could
	// not apply; it keeps serving the tier's previous configuration, if any.
	ErrInvalidTier = errors.New("router: tier cannot be applied")
)

// Internal errors.
var (
	// errNotExchange reports a request given to the member client that no
	// exchange sent.
	errNotExchange = errors.New("router: request is not an exchange's")
	// errUpgrade reports a member that answered with 101 Switching
	// Protocols, which no inference request asks for.
	errUpgrade = errors.New("router: member switched protocols")
	// errBodyClosed is returned by reads of a member's response body after
	// Close.
	errBodyClosed = errors.New("router: response body closed")
	// errBodyTooLarge reports a request body above the limit.
	errBodyTooLarge = errors.New("router: request body too large")
	// errKeyWatch reports a KeyWatch that cannot run.
	errKeyWatch = errors.New("router: key watch misconfigured")
)
