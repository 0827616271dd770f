// Package controller holds the ReplicaTier reconciler: it validates each
// tier, resolves alias conflicts among the tiers of one node, writes the
// validated admission intent and the Accepted, Programmed and Ready
// conditions to status, and records events on transitions.
//
// The reconciler owns status.observedGeneration, status.memberCount,
// status.conditions and status.admission. It must never write the
// router-owned status.members and status.router, and never patch status when
// nothing changed.
package controller
