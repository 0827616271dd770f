// Package mcpserver is the Model Context Protocol server of kubectl-sluice
// (`kubectl sluice mcp`): it offers agents two tools, list_tiers and
// member_transition, over any MCP transport (stdio in the plugin).
//
// It owns the tool catalog (names, descriptions, closed input schemas and
// the output schemas), the checks of every argument before any request to
// the API server, the projection of tiers into tool results, and the
// rewording of errors into tool errors. Every read and change goes through
// internal/transition, the request path the plugin's commands use, with the
// credentials and RBAC of the user's kubeconfig.
//
// The package must never write to stdout or stderr itself (its logger is
// handed in), never return a member endpoint, a credential, a URL or a raw
// Go error to a client, never write when asked for a dry run, and never
// change intent other than the scope it was asked about.
package mcpserver
