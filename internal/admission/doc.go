// Package admission owns the admission state of one replica tier: the only
// lock, the only rotating cursor and the only reservation counts. A Tier
// admits a request by validating the caller's completed readiness and
// pressure snapshots, then, under its lock, rechecking quiesce and ceilings,
// selecting a member (scheduler.Rank for the Capacity strategy, rotation for
// RoundRobin and direct tiers) and reserving the member and the tier
// together. The reservation is a Lease, released exactly once. The package
// also owns tier and member quiesce, drain and atomic reconfiguration, and
// the handover of a tier's admission between two owners (HandOver, Adopt):
// changes are queued for the new owner, never called back under the lock.
//
// Under its lock the package must never perform I/O, read a clock, call back
// into caller code or read a caller-owned map; inputs are validated and copied
// before the lock is taken. It must never wait for capacity: a request that
// cannot be admitted is refused at once with a sentinel error. It imports
// only the scheduler package of this project.
package admission
