// Command router is sluice's per-node router: it reads the ReplicaTiers of
// its node from the Kubernetes API (kube mode, reporting status back) or
// from a directory of manifests (files mode), probes the members'
// readiness, samples their engine pressure, and serves the OpenAI-compatible
// front door and the admin API. The logic lives in internal/router,
// internal/source and internal/status; this command parses flags, wires
// them and shuts down gracefully on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/version"
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
	// SIGTERM; it must stay below the pod's terminationGracePeriodSeconds.
	defaultShutdownTimeout = 30 * time.Second
	// readHeaderTimeout bounds a client's request headers on both listeners.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes idle client keep-alive connections.
	idleTimeout = 120 * time.Second
	// adminShutdownTimeout bounds the admin server's shutdown, after the
	// front door's: a pending drain call gets this long to answer.
	adminShutdownTimeout = 5 * time.Second
)

// config is the parsed command line.
type config struct {
	tiersDir        string
	pollInterval    time.Duration
	nodeName        string
	listen          string
	adminListen     string
	apiKeysFile     string
	adminTokenFile  string
	maxBodyBytes    int64
	decisionLogSize int
	decisionLogFile string
	shutdownTimeout time.Duration
	logLevel        slog.Level
	showVersion     bool
	kube            kubeFlags
}

// parseFlags parses args; errors are printed to out with the usage.
func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.tiersDir, "tiers-dir", "", "directory of ReplicaTier manifests (files mode); without it the router runs the kube source")
	fs.DurationVar(&c.pollInterval, "tiers-poll-interval", source.DefaultPollInterval, "how often the manifest directory is reread")
	fs.StringVar(&c.nodeName, "node-name", os.Getenv("NODE_NAME"), "this router's node; tiers of other nodes are ignored (default $NODE_NAME)")
	fs.StringVar(&c.listen, "listen", ":8080", "front door listen address")
	fs.StringVar(&c.adminListen, "admin-listen", ":9090", "admin listen address")
	fs.StringVar(&c.apiKeysFile, "api-keys-file", "", "file of bearer API keys, one a line; none means the front door is open")
	fs.StringVar(&c.adminTokenFile, "admin-token-file", "", "file of admin bearer tokens, one a line; none means /admin/v1 is open")
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", router.DefaultMaxBodyBytes, "largest request body accepted (413 above)")
	fs.IntVar(&c.decisionLogSize, "decision-log-size", defaultDecisionLogSize, "decision records kept in memory for /admin/v1/decisions (0 keeps none)")
	fs.StringVar(&c.decisionLogFile, "decision-log-file", "", "JSONL file the decision records are appended to (rotated at 64 MiB, one previous file kept as FILE.1); none means memory only")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long in-flight requests may finish after SIGTERM")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and revision and exit")
	c.kube.register(fs)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if c.showVersion {
		return c, nil
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.nodeName == "":
		return config{}, errors.New("--node-name (or $NODE_NAME) is required")
	case c.maxBodyBytes <= 0:
		return config{}, errors.New("--max-body-bytes must be positive")
	case c.decisionLogSize < 0 || c.decisionLogSize > maxDecisionLogSize:
		return config{}, fmt.Errorf("--decision-log-size must be within 0..%d", maxDecisionLogSize)
	case c.shutdownTimeout <= 0:
		return config{}, errors.New("--shutdown-timeout must be positive")
	case c.pollInterval < source.MinPollInterval || c.pollInterval > source.MaxPollInterval:
		return config{}, fmt.Errorf("--tiers-poll-interval must be within %v..%v", source.MinPollInterval, source.MaxPollInterval)
	}
	return c, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
}

// startedRouter is what run hands to its started callback (tests).
type startedRouter struct {
	front, admin net.Addr
	probes       *readiness.Cache
	notReady     <-chan struct{} // closed once shutdown made /readyz fail.
}

// run starts the router and blocks until ctx ends (SIGTERM) or a part
// fails, then shuts down. started, when set (tests), is called once both
// listeners are up and the first snapshot is applied.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, started func(startedRouter)) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.showVersion {
		_, err := fmt.Fprintln(stdout, version.String("router"))
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	var keys, token *router.Keys
	if cfg.apiKeysFile != "" {
		if keys, err = router.LoadKeys(cfg.apiKeysFile); err != nil {
			return err
		}
	} else {
		logger.Warn("no --api-keys-file: the front door accepts every request")
	}
	if cfg.adminTokenFile != "" {
		if token, err = router.LoadKeys(cfg.adminTokenFile); err != nil {
			return err
		}
	} else {
		logger.Warn("no --admin-token-file: the admin API is open")
	}
	obs, err := newObservability(cfg)
	if err != nil {
		return err
	}
	defer obs.close(logger)
	probes := readiness.New(readiness.Options{})
	samples := pressure.New(pressure.Options{Collector: obs.collector()})
	defer samples.Close()
	rt := router.New(router.Options{
		Readiness:    probes,
		Pressure:     samples,
		Keys:         keys,
		MaxBodyBytes: cfg.maxBodyBytes,
		Logger:       logger,
		Recorder:     obs.recorder(),
	})
	defer rt.Close()
	admin := router.NewAdmin(rt, router.AdminOptions{Token: token})
	obs.register(admin, rt)
	src, err := newTierSource(cfg, logger, admin)
	if err != nil {
		return err
	}

	var lc net.ListenConfig
	frontLn, err := lc.Listen(ctx, "tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("front door listener: %w", err)
	}
	adminLn, err := lc.Listen(ctx, "tcp", cfg.adminListen)
	if err != nil {
		_ = frontLn.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	front, adminSrv := newServer(rt), newServer(admin)

	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := make(chan error, 4)
	done := make(chan struct{}, 4)
	spawn := func(name string, f func() error) {
		go func() {
			defer func() { done <- struct{}{} }()
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	spawn("readiness", func() error { return probes.Run(runCtx) })
	firstApplied := make(chan struct{})
	spawn("source", func() error {
		return src.Run(runCtx, func(s source.Snapshot) {
			apply(logger, probes, samples, rt, s)
			select {
			case <-firstApplied:
			default:
				close(firstApplied)
			}
		})
	})
	spawn("front door", func() error { return front.Serve(frontLn) })
	spawn("admin", func() error { return adminSrv.Serve(adminLn) })
	logger.Info("router started", "node", cfg.nodeName, "listen", frontLn.Addr().String(), "admin_listen", adminLn.Addr().String())

	notReady := make(chan struct{})
	var runErr error
	select {
	case <-firstApplied:
		if started != nil {
			started(startedRouter{front: frontLn.Addr(), admin: adminLn.Addr(), probes: probes, notReady: notReady})
		}
		select {
		case <-ctx.Done():
		case runErr = <-failed:
		}
	case <-ctx.Done():
	case runErr = <-failed:
	}
	if runErr != nil {
		logger.Error("shutting down after a failure", "error", runErr.Error())
	} else {
		logger.Info("shutting down", "timeout", cfg.shutdownTimeout)
	}
	admin.NotReady()
	close(notReady)
	shutdown(logger, front, adminSrv, cfg.shutdownTimeout)
	cancel()
	probes.Close()
	samples.Close()
	for range 4 {
		<-done
	}
	logger.Info("router stopped")
	return runErr
}

// newServer returns an HTTP server for h. There is no write timeout:
// streams last as long as the engine streams, bounded by the tiers' idle
// timeouts. net/http's own error log, which quotes client addresses and raw
// errors, is discarded.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// shutdown stops accepting, lets in-flight requests finish until the
// timeout, then closes what remains (its leases are released as the
// handlers see their clients gone).
func shutdown(logger *slog.Logger, front, adminSrv *http.Server, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := front.Shutdown(ctx); err != nil {
		logger.Warn("in-flight requests outlived the shutdown timeout; closing them")
		_ = front.Close()
	}
	actx, acancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
	defer acancel()
	if err := adminSrv.Shutdown(actx); err != nil {
		_ = adminSrv.Close()
	}
}

// apply registers a snapshot's tiers with the readiness probes and the
// pressure cache, then applies it to the router. A cache that refuses the
// registration keeps its previous one (its members read not ready or
// unknown); the error is logged.
func apply(logger *slog.Logger, probes *readiness.Cache, samples *pressure.Cache, rt *router.Router, s source.Snapshot) {
	if err := probes.Reconfigure(router.ReadinessTiers(s)); err != nil {
		logger.Error("readiness probes not reconfigured", "error", err.Error())
	}
	if err := samples.Reconfigure(router.PressureTiers(s)); err != nil {
		logger.Error("pressure cache not reconfigured", "error", err.Error())
	}
	rt.Apply(s)
	for _, e := range s.Errors {
		logger.Warn("manifest rejected; its tiers keep their last good configuration", "file", e.File, "error", e.Message)
	}
	for _, r := range s.Rejected {
		logger.Warn("tier not served", "tier", r.Tier.Key, "reason", string(r.Reason), "detail", r.Message)
	}
}
