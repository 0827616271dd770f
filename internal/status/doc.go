// Package status reports what the router on a node applies back into the
// ReplicaTiers it serves: status.router (node, appliedGeneration,
// applyError), status.members (id, ready, phase Admitting, Draining or
// Drained) and status.queue (the admission queue's bound, depth and oldest
// wait in whole seconds), written with server-side apply under the field
// manager "sluice-router", so the manager's fields (observedGeneration,
// conditions, admission) are never touched.
//
// A RouterView derives one Report per tier from what the router actually
// has in force (tiers.Set.Applied: the generation and members of the
// configuration in force, and why a newer one failed to apply) and the
// router's capacity view (admission phases and readiness), so a report
// never claims a generation the router does not serve. The Reporter compares the view with what it last wrote on a
// short timer and after every applied snapshot, and writes a tier only when
// its report changed: transitions only, coalesced, at most one write per
// tier per MinWriteInterval, backing off while the API server fails. A
// change of the queue's load alone is written at most once per tier per
// QueueStatusInterval: status is an operator's view, not a metrics pipe.
//
// The package must never write per request, never write the manager's
// fields, never block the router's request path (it only reads snapshots),
// and never read a clock other than the injected one.
package status
