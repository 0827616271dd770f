// Package source turns tier configuration into complete, immutable Snapshots
// of the ReplicaTiers one router serves. There are two sources.
//
// Files reads multi-document ReplicaTier manifests from a directory,
// defaults and validates them with the api/v1alpha1 functions the manager
// and the CRD share, keeps the last good tiers of a file that turns invalid,
// resolves alias conflicts by namespace/name, and publishes a new Snapshot
// whenever a file changes.
//
// Kube lists and watches the ReplicaTiers of one node (field selector
// spec.nodeName) and applies a tier only at a generation the manager
// accepted, with the quiesce intent of status.admission; a tier whose newest
// generation is not accepted keeps its last applied version, the last
// Snapshot stays in force while the API server is unreachable, and the
// source relists after reconnecting.
//
// The package must never apply configuration itself (the router does, one
// tier at a time), never publish a partial view or one it still mutates,
// never write to the API server, never read a clock other than the injected
// one, and never report an endpoint URL, credential or file content other
// than the operator's own error location in its errors.
package source
