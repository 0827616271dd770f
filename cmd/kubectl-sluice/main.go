// Command kubectl-sluice is the sluice kubectl plugin: `kubectl sluice
// status|quiesce|readmit|drain TIER [--member ID]`, and `kubectl sluice mcp`,
// an MCP server offering the same transitions to agents on stdin and stdout.
// Put it on PATH and kubectl finds it. The logic lives in internal/plugin and
// internal/mcpserver; this command only runs it.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sluice-dev/sluice/cmd/kubectl-sluice/internal/plugin"
)

func main() {
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	os.Exit(plugin.Execute(cmd))
}
