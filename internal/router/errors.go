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
	// errNotExchange reports a request given to the member client that no
	// exchange sent.
	errNotExchange = errors.New("router: request is not an exchange's")
	// errUpgrade reports a member that answered with 101 Switching
	// Protocols, which no inference request asks for.
	errUpgrade = errors.New("router: member switched protocols")
	// errTooManyInformational reports a member that sent more than
	// maxInformational 1xx responses before its final one.
	errTooManyInformational = errors.New("router: too many informational responses")
	// errHeaderTooLarge reports a member whose response heads (1xx ones
	// included) exceeded maxResponseHeaderBytes.
	errHeaderTooLarge = errors.New("router: member response headers too large")
	// errNotReceived reports a request that failed on a reused connection
	// which provably never delivered it to the member: nothing was
	// written, or the member had closed the connection and reset the
	// request's bytes (docs/ROUTER.md#21-the-member-client). The request
	// goes out once more, on a fresh connection.
	errNotReceived = errors.New("router: request not received by the member")
	// errNotSent reports a request no byte of which was written to the
	// member: the connection was refused, or a fresh one was reset before
	// its first byte went out. It wraps errMemberRefused or errMemberReset.
	// The engine cannot have seen the request, so it goes back to admission
	// once (readmit), never to the same member.
	errNotSent = errors.New("router: request not sent to the member")
	// errMemberRefused reports a member that refused the connection.
	errMemberRefused = errors.New("router: member refused the connection")
	// errMemberReset reports a member that reset a fresh connection before
	// any response byte.
	errMemberReset = errors.New("router: member reset the connection")
	// errMemberClosed reports a member that closed the connection after
	// taking the request, before any response byte.
	errMemberClosed = errors.New("router: member closed the connection")
	// errBodyClosed is returned by reads of a member's response body after
	// Close.
	errBodyClosed = errors.New("router: response body closed")
	// errNoRoute reports a lease whose member has no route in the tier's
	// configuration, which cannot happen.
	errNoRoute = errors.New("router: leased member has no route")
	// errBodyTooLarge reports a request body above the limit.
	errBodyTooLarge = errors.New("router: request body too large")
	// errBodyBudget reports a request body buffer the body budget
	// (--max-buffered-body-bytes) cannot hold.
	errBodyBudget = errors.New("router: request body budget exhausted")
)
