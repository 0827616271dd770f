package upstream

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrNotSent reports a request no byte of which was written to the
	// member: the connection was refused, or a fresh one was reset before
	// its first byte went out. It wraps ErrRefused or ErrReset. The member
	// cannot have seen the request.
	ErrNotSent = errors.New("upstream: request not sent to the member")
	// ErrRefused reports a member that refused the connection.
	ErrRefused = errors.New("upstream: member refused the connection")
	// ErrReset reports a member that reset a fresh connection before any
	// response byte.
	ErrReset = errors.New("upstream: member reset the connection")
	// ErrClosed reports a member that closed the connection after taking
	// the request, before any response byte.
	ErrClosed = errors.New("upstream: member closed the connection")
	// ErrSwitchingProtocols reports a member that answered with 101
	// Switching Protocols, which the client never asks for.
	ErrSwitchingProtocols = errors.New("upstream: member switched protocols")
	// ErrTooManyInformational reports a member that sent more than
	// MaxInformational 1xx responses before its final one.
	ErrTooManyInformational = errors.New("upstream: too many informational responses")
	// ErrHeaderTooLarge reports a member whose response heads (1xx ones
	// included) exceeded MaxResponseHeadBytes.
	ErrHeaderTooLarge = errors.New("upstream: member response headers too large")
	// ErrBodyClosed is returned by reads of an Attempt's body after Close.
	ErrBodyClosed = errors.New("upstream: response body closed")

	// errNotReceived reports a request that failed on a reused connection
	// which provably never delivered it to the member: nothing was
	// written, or the member had closed the connection and reset the
	// request's bytes. The request goes out once more, on a fresh
	// connection; callers never see it.
	errNotReceived = errors.New("upstream: request not received by the member")
)
