// Package tiers owns the configuration a router serves: it applies source
// snapshots tier by tier (Set.Plan, Set.Apply), each atomically with
// admission.Tier.Apply, checks member locality, keeps a tier that left the
// configuration until its last lease is released, and holds the table in
// force, an immutable value swapped atomically that the request path reads
// lock-free (Set.Table). It builds every admission decision's inputs from
// completed readiness and pressure snapshots (Set.Inputs), and names what
// the readiness probes and the pressure cache register (ReadinessTiers,
// PressureTiers).
//
// The package must never wait for readiness, pressure or in-flight
// requests, never do I/O beyond reading this host's addresses, never
// mutate quiesce intent (it only applies what the source declares), and
// never put an endpoint URL, address or raw Go error text in a message it
// produces.
package tiers
