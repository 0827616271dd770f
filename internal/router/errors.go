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

// Internal errors: the causes of an exchange's cancellation, read back with
// context.Cause, and the request body's own.
var (
	// errHeaderTimeout cancels an exchange whose member sent no response
	// headers within the tier's responseHeaderTimeout.
	errHeaderTimeout = errors.New("router: upstream response header timeout")
	// errIdleTimeout cancels an exchange whose member sent no body bytes
	// within the tier's idleTimeout.
	errIdleTimeout = errors.New("router: upstream idle timeout")
	// errExchangeDone cancels an exchange's context once it has ended, to
	// free its resources.
	errExchangeDone = errors.New("router: exchange ended")
	// errBodyRecycled is returned by reads of a request body after the
	// exchange returned its buffer to the pool.
	errBodyRecycled = errors.New("router: request body already recycled")
	// errBodyTooLarge reports a request body above the limit.
	errBodyTooLarge = errors.New("router: request body too large")
)
