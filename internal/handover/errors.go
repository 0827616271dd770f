package handover

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrProtocol is returned when the peer sends something the
	// protocol does not allow: a wrong hello, a malformed or oversized
	// message, or a message out of order.
	ErrProtocol = errors.New("handover: handover protocol violation")
	// ErrSuccessorGone is returned by Serve when the successor
	// closed the channel or stopped reading before this router stopped:
	// the tiers admit again.
	ErrSuccessorGone = errors.New("handover: successor gone")
	// ErrHandedOverAlready is returned by Serve when a tier's
	// admission is handed over already (another Serve runs).
	ErrHandedOverAlready = errors.New("handover: admission handed over already")
	// ErrRefused is returned by Serve when Gate.Hello
	// refused a successor whose hello was valid: nothing was handed over.
	ErrRefused = errors.New("handover: successor refused")
	// ErrBounds is returned by Adopt when the predecessor's
	// counts exceed what this router's ceilings allow it to adopt: a
	// snapshot that does is refused whole before anything is adopted, and
	// a later reservation that does ends the handover.
	ErrBounds = errors.New("handover: handover counts above this router's ceilings")
)
