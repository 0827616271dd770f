package mcpserver

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serverName is the name the server gives clients in its implementation
// info.
const serverName = "kubectl-sluice"

// apiTimeout bounds every tool call but drain's wait: a read or a patch
// the API server has not answered in 30 seconds is not coming, and the
// agent is better told so than left waiting.
const apiTimeout = 30 * time.Second

// maxListedTiers bounds list_tiers' answer: an answer an agent reads in one
// turn (a tier is about a kilobyte of JSON with 16 members). A namespace
// with more tiers is reported as truncated.
const maxListedTiers = 100

// instructions tell clients what the server is for.
const instructions = "Inspect and change the admission of sluice ReplicaTiers (identical replicas of one model on one GPU node). " +
	"list_tiers shows the tiers of a namespace; member_transition shows, quiesces, readmits or drains a tier or one member. " +
	"Quiesce stops new requests only: requests in flight finish. Use dry_run to check a change first."

// Options configure a server.
type Options struct {
	// Client talks to the API server with the user's credentials; every
	// tool call uses it. Required.
	Client client.WithWatch
	// Namespace is the namespace list_tiers lists when the call names none
	// (the kubeconfig's). Required.
	Namespace string
	// Version is the version the server reports to clients; empty reports
	// "devel".
	Version string
	// Logger receives the server's logs (never on the protocol's stream);
	// nil discards them.
	Logger *slog.Logger
}

// server holds what the tool handlers share.
type server struct {
	client    client.WithWatch
	namespace string
	logger    *slog.Logger
}

// New returns an MCP server offering list_tiers and member_transition.
// Run it with (*mcp.Server).Run on a transport.
func New(o Options) *mcp.Server {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	version := o.Version
	if version == "" {
		version = "devel"
	}
	s := &server{client: o.Client, namespace: o.Namespace, logger: logger}
	srv := mcp.NewServer(&mcp.Implementation{Name: serverName, Version: version},
		&mcp.ServerOptions{Instructions: instructions, Logger: logger})
	mcp.AddTool(srv, listTiersTool(), s.listTiers)
	mcp.AddTool(srv, transitionTool(), s.memberTransition)
	return srv
}

// Serve runs a server of o on transport until the client disconnects or
// ctx ends.
func Serve(ctx context.Context, o Options, transport mcp.Transport) error {
	return New(o).Run(ctx, transport)
}
