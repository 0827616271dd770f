// Command router is sluice's per-node router: it reads the ReplicaTiers of
// its node from the Kubernetes API (kube mode, reporting status back) or
// from a directory of manifests (files mode), probes the members'
// readiness, samples their engine pressure, and serves the OpenAI-compatible
// front door and the admin API. The logic lives in internal/router,
// internal/nodeconfig, internal/source and internal/status; this command
// parses flags, wires them, runs them under one group of parts and shuts
// down gracefully on SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// Defaults and bounds of the flags.
const (
	// defaultDecisionLogSize is the decision ring buffer's default size
	// (docs/EVIDENCE.md#2-storage).
	defaultDecisionLogSize = 4096
	// maxDecisionLogSize bounds the ring buffer: a record is a few hundred
	// bytes, so a million is a few hundred MiB, more than any router needs.
	maxDecisionLogSize = 1_000_000
	// defaultShutdownTimeout is how long in-flight requests may run after
	// SIGTERM (and the grace); it must stay below the pod's
	// terminationGracePeriodSeconds.
	defaultShutdownTimeout = 30 * time.Second
	// defaultShutdownGrace is how long the router keeps accepting after
	// SIGTERM while telling every client to reconnect: a busy keep-alive
	// client sends its next request well within 5 s and moves to the new
	// router; with --shutdown-timeout and the admin server's 5 s it stays
	// within the DaemonSet's 45 s terminationGracePeriodSeconds.
	defaultShutdownGrace = 5 * time.Second
	// maxShutdownGrace bounds --shutdown-grace: past a minute a pod
	// deletion waits for nothing but idle clients.
	maxShutdownGrace = time.Minute
	// defaultBodyReadTimeout is the default --body-read-timeout: a
	// 16 MiB body (the default --max-body-bytes) arrives within it at a
	// little over 2 Mbit/s, slower than any client that should hold a
	// connection to a GPU node.
	defaultBodyReadTimeout = 60 * time.Second
)

// config is the parsed command line.
type config struct {
	memberIdleTimeout time.Duration
	tiersDir          string
	pollInterval      time.Duration
	nodeName          string
	listen            string
	adminListen       string
	apiKeysFile       string
	adminTokenFile    string
	maxBodyBytes      int64
	maxBufferedBodies int64
	maxConns          int
	maxUnauthConns    int
	enablePprof       bool
	accessLog         bool
	bodyReadTimeout   time.Duration
	keysPoll          time.Duration
	decisionLogSize   int
	decisionLogFile   string
	shutdownTimeout   time.Duration
	shutdownGrace     time.Duration
	passEngineHeaders []string
	tenantHeader      string
	logging           cmdline.Logging
	readyWithoutTiers bool
	strictManifests   bool
	kube              kubeFlags
}

// The listeners' defaults. A router in files mode is one an operator
// starts by hand, so it listens on loopback unless told otherwise: its front
// door and admin API are open when no key or token file is given. In kube
// mode the DaemonSet passes its addresses explicitly; the default is every
// address of the node (hostNetwork), as that is where clients reach it.
const (
	filesListen      = "127.0.0.1:8080"
	filesAdminListen = "127.0.0.1:9090"
	kubeListen       = ":8080"
	kubeAdminListen  = ":9090"
)

// defaultListeners fills the listen addresses that were not given with
// their mode's defaults.
func (c *config) defaultListeners() {
	listen, admin := kubeListen, kubeAdminListen
	if c.tiersDir != "" {
		listen, admin = filesListen, filesAdminListen
	}
	if c.listen == "" {
		c.listen = listen
	}
	if c.adminListen == "" {
		c.adminListen = admin
	}
}

// help is the router's help besides its flags.
var help = cmdline.Help{
	Name:     "router",
	Synopsis: "--node-name NAME [--tiers-dir DIR] [flags]",
	Summary: "router is sluice's per-node router: it serves the OpenAI-compatible front door and the admin\n" +
		"API for the ReplicaTiers of its node, read from a directory of manifests (files mode, with\n" +
		"--tiers-dir) or from the Kubernetes API (kube mode). docs/CONFIGURATION.md describes every flag.",
	Examples: []cmdline.Example{
		{Comment: "files mode on loopback: the sample tiers of node gpu-node-1, behind API keys", Command: "router --tiers-dir config/samples --node-name gpu-node-1 --api-keys-file keys.txt"},
		{Comment: "kube mode, as the DaemonSet runs it", Command: "router --node-name \"$NODE_NAME\" --api-keys-file /etc/sluice/api-keys/keys --admin-token-file /etc/sluice/admin-token/token"},
	},
}

// parseFlags parses args. Help and version lines are printed to out
// (stdout); every other error is a usage error, returned.
func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	cmd := cmdline.New(help)
	fs := cmd.Flags
	fs.StringVar(&c.tiersDir, "tiers-dir", "", "directory of ReplicaTier manifests (files mode); without it the router runs the kube source")
	fs.DurationVar(&c.pollInterval, "tiers-poll-interval", source.DefaultPollInterval, "how often the manifest directory is reread")
	fs.StringVar(&c.nodeName, "node-name", os.Getenv("NODE_NAME"), "this router's node; tiers of other nodes are ignored (default $NODE_NAME)")
	fs.StringVar(&c.listen, "listen", "", "front door listen address (default "+filesListen+" in files mode, "+kubeListen+" in kube mode)")
	fs.StringVar(&c.adminListen, "admin-listen", "", "admin listen address (default "+filesAdminListen+" in files mode, "+kubeAdminListen+" in kube mode)")
	fs.StringVar(&c.apiKeysFile, "api-keys-file", "", "file of bearer API keys, one a line, reread when it changes; none means the front door is open")
	fs.StringVar(&c.adminTokenFile, "admin-token-file", "", "file of admin bearer tokens, one a line, reread when it changes; none means /admin/v1 is open")
	fs.DurationVar(&c.keysPoll, "keys-poll-interval", apikeys.DefaultPollInterval, "how often the key and token files are reread")
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", router.DefaultMaxBodyBytes, "largest request body accepted (413 above)")
	fs.BoolVar(&c.enablePprof, "enable-pprof", false, "serve Go's profiles at /debug/pprof/ on the admin listener, behind the admin token (needs --admin-token-file)")
	fs.BoolVar(&c.accessLog, "access-log", false, "log every request's line at INFO (without it, only failed exchanges are logged at WARN, the rest at DEBUG)")
	fs.Int64Var(&c.maxBufferedBodies, "max-buffered-body-bytes", router.DefaultMaxBufferedBodyBytes,
		"request body bytes held at once, all requests together (503 body_buffer_exhausted above); more than twice --max-body-bytes")
	fs.IntVar(&c.maxConns, "max-connections", defaultMaxConnections,
		"front door connections open at once; over it the oldest unauthenticated one is closed, or the new one when all are authenticated")
	fs.IntVar(&c.maxUnauthConns, "max-unauthenticated-connections", defaultMaxUnauthenticated,
		"front door connections open at once that have not carried an authenticated request; over it the oldest is closed")
	fs.DurationVar(&c.bodyReadTimeout, "body-read-timeout", defaultBodyReadTimeout, "how long a request's headers and body may take to arrive (400 after)")
	fs.IntVar(&c.decisionLogSize, "decision-log-size", defaultDecisionLogSize, "decision records kept in memory for /admin/v1/decisions (0 keeps none)")
	fs.StringVar(&c.decisionLogFile, "decision-log-file", "", "JSONL file the decision records are appended to (rotated at 64 MiB, one previous file kept as FILE.1); none means memory only")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long in-flight requests may finish after SIGTERM and the grace")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", defaultShutdownGrace, "how long the router keeps accepting after SIGTERM, telling clients to reconnect, so they move to the router replacing it")
	passHeaders := fs.String("pass-engine-headers", "", "engine response headers to let through, comma-separated, of those the router strips: "+
		strings.Join(router.StrippedEngineHeaders(), ", ")+" (default none)")
	fs.StringVar(&c.tenantHeader, "tenant-header", "", "request header whose value names an authenticated request's tenant, at its key's priority "+
		"(behind the Gateway API Inference Extension: "+router.GatewayFairnessHeader+"); none means the key's tenant")
	cmd.Logging(&c.logging)
	fs.BoolVar(&c.readyWithoutTiers, "ready-without-tiers", false,
		"report ready on /readyz once the configuration is loaded even when it serves no tier (for a router started before its tiers exist)")
	fs.BoolVar(&c.strictManifests, "strict-manifests", false,
		"files mode: fail start when a manifest or a tier of this node is rejected (later reloads keep the last good configuration)")
	c.kube.register(fs)
	memberIdle := memberIdleTimeoutFlag(fs)
	// The router has no deprecated alias: nothing is printed but help and
	// version, both to out.
	if err := cmd.Parse(args, out, out); err != nil {
		return config{}, err
	}
	c.memberIdleTimeout = *memberIdle
	headers, err := router.ParsePassEngineHeaders(*passHeaders)
	if err != nil {
		return config{}, fmt.Errorf("--pass-engine-headers: %w", err)
	}
	c.passEngineHeaders = headers
	if c.tenantHeader, err = router.ParseTenantHeader(c.tenantHeader); err != nil {
		return config{}, fmt.Errorf("--tenant-header: %w", err)
	}
	c.defaultListeners()
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.nodeName == "":
		return config{}, errors.New("--node-name (or $NODE_NAME) is required")
	case c.maxBodyBytes <= 0:
		return config{}, errors.New("--max-body-bytes must be positive")
	case c.strictManifests && c.tiersDir == "":
		return config{}, errors.New("--strict-manifests needs --tiers-dir: in kube mode the manager validates the ReplicaTiers")
	case c.enablePprof && c.adminTokenFile == "":
		return config{}, errors.New("--enable-pprof needs --admin-token-file: profiles are served behind the admin token only")
	case c.maxBufferedBodies/2 <= c.maxBodyBytes:
		return config{}, errors.New("--max-buffered-body-bytes must be above twice --max-body-bytes")
	case c.decisionLogSize < 0 || c.decisionLogSize > maxDecisionLogSize:
		return config{}, fmt.Errorf("--decision-log-size must be within 0..%d", maxDecisionLogSize)
	case c.shutdownTimeout <= 0:
		return config{}, errors.New("--shutdown-timeout must be positive")
	case c.shutdownGrace < 0 || c.shutdownGrace > maxShutdownGrace:
		return config{}, fmt.Errorf("--shutdown-grace must be within 0..%v", maxShutdownGrace)
	case c.maxConns < 1 || c.maxConns > maxConnectionLimit:
		return config{}, fmt.Errorf("--max-connections must be within 1..%d", maxConnectionLimit)
	case c.maxUnauthConns < 1 || c.maxUnauthConns > c.maxConns:
		return config{}, errors.New("--max-unauthenticated-connections must be within 1..--max-connections")
	case c.bodyReadTimeout <= 0:
		return config{}, errors.New("--body-read-timeout must be positive")
	case c.keysPoll < apikeys.MinPollInterval || c.keysPoll > apikeys.MaxPollInterval:
		return config{}, fmt.Errorf("--keys-poll-interval must be within %v..%v", apikeys.MinPollInterval, apikeys.MaxPollInterval)
	case c.pollInterval < source.MinPollInterval || c.pollInterval > source.MaxPollInterval:
		return config{}, fmt.Errorf("--tiers-poll-interval must be within %v..%v", source.MinPollInterval, source.MaxPollInterval)
	}
	return c, nil
}

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	drain, hurry, stop := twoSignals(sigs)
	err := run(drain, hurry, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	signal.Stop(sigs)
	os.Exit(cmdline.Report(help.Name, err, os.Stderr))
}

// startedRouter is what run hands to its started callback (tests).
type startedRouter struct {
	front, admin net.Addr
	probes       *readiness.Cache
	notReady     <-chan struct{}       // closed once shutdown made /readyz fail.
	opened       <-chan struct{}       // closed once requests pass: the predecessor's leases adopted, or none.
	keyReloads   <-chan apikeys.Reload // what the key watches reported, newest dropped when full.
}

// run starts the router and blocks until ctx ends (SIGTERM) or a part
// fails, then shuts down. The admin listener opens first (its /readyz
// fails until the front door listens); the front door opens once the first
// snapshot is applied and every member was probed once, so that a router
// replacing another takes connections only when it can serve them.
// hurry ends at a second SIGTERM: the drain then ends at once, in-flight
// requests are cancelled and run returns (docs/ROUTER.md#8-shutdown).
// started, when set (tests), is called once both listeners are up.
func run(ctx, hurry context.Context, args []string, stdout, stderr io.Writer, started func(startedRouter)) error {
	cfg, err := parseFlags(args, stdout)
	switch {
	case errors.Is(err, cmdline.ErrHelp), errors.Is(err, cmdline.ErrVersion):
		return nil
	case err != nil:
		// Every error of the command line is a usage error.
		return cmdline.Usagef("%w", err)
	}
	logger := cfg.logging.Logger(stderr)
	n, err := newNode(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer n.close()

	p := newParts()
	first := n.start(p)
	runErr := n.serve(ctx, p, first, started)
	if runErr != nil {
		logger.Error("shutting down after a failure", "error", runErr.Error())
	} else {
		logger.Info("shutting down", "grace", cfg.shutdownGrace, "timeout", cfg.shutdownTimeout)
	}
	stopHurry := context.AfterFunc(hurry, func() {
		logger.Warn("second signal: ending the drain now, in-flight requests are closed")
		n.endRequests()
	})
	defer stopHurry()
	n.beginDrain()
	if runErr == nil {
		runErr = n.grace(hurry, p)
	}
	n.stop(hurry)
	p.wait()
	logger.Info("router stopped")
	return runErr
}
