package plugin

import (
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/cmd/kubectl-sluice/internal/mcpserver"
	"github.com/sluice-dev/sluice/internal/version"
)

// nopWriteCloser is a writer whose Close does nothing: the server must not
// close the plugin's stdout.
type nopWriteCloser struct{ io.Writer }

// Close does nothing.
func (nopWriteCloser) Close() error { return nil }

func (c *cli) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve list_tiers and member_transition to agents over MCP on stdin and stdout",
		Long: "mcp runs a Model Context Protocol server on stdin and stdout with the kubeconfig, context and namespace\n" +
			"flags (and so the RBAC) of the user. Its tools list tiers and show, quiesce, readmit or drain a tier\n" +
			"or member through the same requests as the other commands. Logs go to stderr. It stops when the\n" +
			"client closes stdin.",
		Example: "  # an agent's MCP client configuration runs this, with the user's kubeconfig\n" +
			"  kubectl sluice mcp -n inference",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ns, err := c.connect()
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(c.streams.ErrOut, nil))
			transport := &mcp.IOTransport{Reader: io.NopCloser(c.streams.In), Writer: nopWriteCloser{c.streams.Out}}
			return mcpserver.Serve(cmd.Context(), mcpserver.Options{Client: cl, Namespace: ns, Version: version.Version(), Logger: logger}, transport)
		},
	}
}
