// Package plugin is the kubectl-sluice command tree: status, quiesce,
// readmit and drain of a ReplicaTier or one of its members, with kubectl's
// standard kubeconfig flags (--kubeconfig, --context, -n and the rest from
// k8s.io/cli-runtime).
//
// Quiesce and readmit change operator intent only, with JSON merge patches
// of exactly spec.quiesce.members.<id> or spec.quiesce.tier, so a member
// operation never touches the tier's intent and the reverse. Every check
// (the tier exists, the member exists, the tier is not a direct tier for a
// member operation, the reason is well formed) happens before any change.
// Drain quiesces the scope when needed and then waits, with a watch, until
// the router on the tier's node reports the scope Drained for the tier's
// current generation.
//
// The package must never write status, never poll with sleeps, and never
// change intent other than the scope it was asked about.
package plugin
