package admission

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrInvalidConfig is returned by New, Reconfigure and Apply for a
	// configuration that breaks a rule of Config.
	ErrInvalidConfig = errors.New("admission: invalid config")
	// ErrInvalidInput is returned by Acquire when the readiness or pressure
	// snapshot names a member outside the tier, lacks a readiness entry for a
	// member, or carries a malformed pressure, or when a readmission landed
	// after the inputs' ReadmitEpoch. Counts and cursor are unchanged.
	ErrInvalidInput = errors.New("admission: invalid acquire input")
	// ErrTierQuiesced is returned by Acquire when the tier is quiesced.
	ErrTierQuiesced = errors.New("admission: tier quiesced")
	// ErrTierFull is returned by Acquire when the tier is at its ceiling, or
	// when every ready, unquiesced member is at its own ceiling: capacity is
	// exhausted.
	ErrTierFull = errors.New("admission: capacity exhausted")
	// ErrNoEligibleMember is returned by Acquire when no member is both ready
	// and unquiesced.
	ErrNoEligibleMember = errors.New("admission: no eligible member")
	// ErrUnknownMember is returned when a scope or intent names a member that
	// is not in the tier.
	ErrUnknownMember = errors.New("admission: unknown member")
	// ErrInvalidReason is returned when a quiesce reason does not match
	// ^[a-z0-9][a-z0-9-]{0,62}$.
	ErrInvalidReason = errors.New("admission: invalid quiesce reason")
	// ErrNotQuiesced is returned by Drain when its scope is not quiesced, or
	// is readmitted while Drain waits.
	ErrNotQuiesced = errors.New("admission: scope not quiesced")
	// ErrHandedOver is returned by HandOver when the tier's admission is
	// handed over already, and wrapped (together with ErrTierQuiesced) by
	// Acquire on a tier whose admission is handed over.
	ErrHandedOver = errors.New("admission: admission handed over")
	// ErrQueueFull is returned by Wait when the tier cannot admit the request
	// and its queue, or the tenant's share of it, is full; and to a waiter
	// that a reconfiguration left beyond the queue's new bounds.
	ErrQueueFull = errors.New("admission: queue full")
	// ErrQueueTimeout is returned by Wait when the request waited the
	// queue's MaxWait without being admitted.
	ErrQueueTimeout = errors.New("admission: queue wait timed out")
	// ErrClientGone is returned by Wait, together with the context's error,
	// when the waiting request's context ended before it was admitted.
	ErrClientGone = errors.New("admission: client gone while queued")
	// ErrQueueHandedOver is wrapped, together with ErrTierQuiesced, in the
	// refusal of a request that waited in a tier when the tier handed its
	// admission over: it started waiting here and is refused, not moved.
	ErrQueueHandedOver = errors.New("admission: admission handed over while queued")
)
