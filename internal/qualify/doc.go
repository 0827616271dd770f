// Package qualify runs the qualification procedure of one ReplicaTier on
// its node (docs/QUALIFICATION.md): it checks each member's served
// identity and the tier's declared provenance, runs a matched workload
// directly against the members and through the router, sustains routed
// load while it quiesces, drains and readmits one member through the same
// transition path people use (internal/transition), restores the tier's
// quiesce intent as it found it, and writes a report with a verdict and an
// evidence label (synthetic or real).
//
// It owns the procedure, its checks and its report. It must never promote
// a tier (the accepted annotation is a person's act), never change
// anything but the one member's quiesce intent it restores, never label
// evidence real when an engine says it is a simulator, and never send a
// request before Execute: Prepare and Plan only read the tier.
package qualify
