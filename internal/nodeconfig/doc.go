// Package nodeconfig applies a router's tier configuration: it owns the
// order in which one source snapshot reaches the parts of a router node.
//
// The router's plan (Tiers.Plan: what Apply would put in force) is
// registered with the readiness probes and the pressure cache first, so
// that a member whose endpoint changes is not ready before the router can
// send to it and an endpoint the router refuses is never probed or
// sampled; then its tiers apply the snapshot (internal/tiers); then the
// request metrics
// export the planned tiers' series and delete the others
// (docs/ROUTER.md#5-configuration-changes).
//
// The package must never log, start a goroutine, hold a lock or do I/O of
// its own: it calls the parts it is given in order and returns what each
// refused, and the command that wires it reports that.
package nodeconfig
