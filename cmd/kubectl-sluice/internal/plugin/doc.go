// Package plugin is the kubectl-sluice command tree: status, quiesce,
// readmit and drain of a ReplicaTier or one of its members, with kubectl's
// standard kubeconfig flags (--kubeconfig, --context, -n and the rest from
// k8s.io/cli-runtime).
//
// The commands are thin callers of internal/transition, which owns the
// request path: the checks before any change, the JSON merge patches of
// exactly one scope's spec.quiesce key, and drain's watch. This package
// owns the command line: flags and arguments, their checks, and printing
// a transition.Status as a table or as JSON. The mcp command serves the
// tools of internal/mcpserver on stdin and stdout, with its logs on
// stderr.
//
// The package must never build patches or read and write ReplicaTiers
// other than through internal/transition, never write status, and never
// poll with sleeps.
package plugin
