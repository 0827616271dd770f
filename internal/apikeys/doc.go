// Package apikeys owns the router's bearer tokens: the key file and its
// format (one key a line, with optional "tenant=NAME" and "priority=N"
// attributes, docs/CONFIGURATION.md#41-tenants-and-priorities), the
// constant-time check of a request's Authorization header that also selects
// the key's tenant, and the watch that keeps a set current with its file
// when the kubelet rotates a mounted Secret.
//
// The package must never quote a key, a tenant or a priority read from a
// file in an error, never let the timing of a check depend on which key
// matched, never allocate on a check, and never serve a key file that two
// consecutive reads do not agree on.
package apikeys
