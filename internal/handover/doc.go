// Package handover is the protocol by which a router hands its admission
// over to its successor on one connection
// (docs/ROUTER.md#81-handing-the-ports-over): the predecessor's side
// (Serve) stops every tier's admission and sends the leases held, then each
// release as it happens; the successor's side (Adopt) checks the snapshot
// against its own ceilings, adopts the leases as reservations of its tiers
// and releases them as the predecessor's releases arrive, or all at once
// when the channel ends.
//
// The package must never adopt past a member's or a tier's ceiling, never
// hold an adopted lease after the channel ended, and never open, name or
// listen on the channel itself: cmd/router does.
package handover
