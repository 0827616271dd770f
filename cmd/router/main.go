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
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/telemetry"
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
	// readHeaderTimeout bounds a client's request headers on both listeners.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes idle client keep-alive connections.
	idleTimeout = 120 * time.Second
	// maxHeaderBytes bounds a request's header block on both listeners
	// (net/http's default is 1 MiB). An API key (at most
	// apikeys.MaxKeyLength, 4 KiB), a request id, tracing headers and the
	// usual client headers fit many times over in 64 KiB, and each
	// connection reading headers pins at most that much.
	maxHeaderBytes = 64 << 10
	// warmUpTimeout bounds the wait, before the front door listens, for a
	// first probe of every member: a probe takes at most
	// readiness.ProbeTimeout, and the prober's own first probe may run
	// before the one the router asks for.
	warmUpTimeout = 3 * readiness.ProbeTimeout
	// warmUpRetry is how soon the warm-up asks again for a probe when the
	// probers have not started yet (they start on their own goroutine).
	warmUpRetry = 10 * time.Millisecond
	// adminShutdownTimeout bounds the admin server's shutdown, after the
	// front door's: a pending drain call gets this long to answer.
	adminShutdownTimeout = 5 * time.Second
	// hurriedShutdownTimeout bounds the wait, after a second signal
	// cancelled every in-flight request, for their handlers to release
	// their leases and return: a cancelled exchange ends as soon as its
	// member read is aborted, in microseconds; only a handler blocked
	// writing to a client that does not read needs its connection closed,
	// which the router does after this bound.
	hurriedShutdownTimeout = time.Second
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

// keyReloadBuffer bounds the reports kept for the started callback (tests
// read a few).
const keyReloadBuffer = 16

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

	var keys, token *apikeys.Keys
	if cfg.apiKeysFile != "" {
		if keys, err = apikeys.Load(cfg.apiKeysFile); err != nil {
			return err
		}
	} else {
		logger.Warn("no --api-keys-file: the front door accepts every request")
	}
	if cfg.adminTokenFile != "" {
		if token, err = apikeys.Load(cfg.adminTokenFile); err != nil {
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
	tracingCfg, err := tracingFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	traces, err := newTracing(ctx, tracingCfg, logger)
	if err != nil {
		return err
	}
	// After the front door shut down (deferred calls run last first).
	defer traces.shutdown(logger)
	// After each probe, requests waiting in a tier's queue go to a member
	// that just turned ready (rt is set below, before the probes run).
	var dispatcher atomic.Pointer[router.Router]
	probes := readiness.New(readiness.Options{Probed: func(string) {
		if rt := dispatcher.Load(); rt != nil {
			rt.Dispatch()
		}
	}})
	samples := pressure.New(pressure.Options{Collector: obs.collector()})
	defer samples.Close()
	var succ *succession
	conns := newConnLimits(cfg.maxConns, cfg.maxUnauthConns)
	rt := router.New(router.Options{
		Readiness:         probes,
		Rechecker:         probes,
		MemberIdleTimeout: cfg.memberIdleTimeout,
		HostAddrs:         hostAddrs(),
		// A request that reached admission after the handover goes to the
		// successor too (succ is set below, before the front door opens).
		HandedOver:           func(w http.ResponseWriter, r *http.Request) { succ.forwardRequest(w, r) },
		Pressure:             samples,
		Keys:                 keys,
		TenantHeader:         cfg.tenantHeader,
		Authenticated:        conns.authenticated,
		MaxBodyBytes:         cfg.maxBodyBytes,
		MaxBufferedBodyBytes: cfg.maxBufferedBodies,
		Logger:               logger,
		PassEngineHeaders:    cfg.passEngineHeaders,
		AccessLog:            cfg.accessLog,
		Recorder:             obs.recorder(),
		Intervals:            obs.requests,
		TracerProvider:       traces.provider(),
	})
	defer rt.Close()
	dispatcher.Store(rt)
	admin := router.NewAdmin(rt, router.AdminOptions{Token: token, ReadyWithoutTiers: cfg.readyWithoutTiers})
	obs.register(admin, rt, telemetry.NewConnectionCollector(conns.counts))
	if cfg.enablePprof {
		registerPprof(admin)
	}
	src, err := newTierSource(cfg, logger, admin)
	if err != nil {
		return err
	}

	adminLn, err := listenOwned(ctx, cfg.adminListen, cfg.listen)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	var serving, draining atomic.Bool
	stopReports := func() {
		if r, ok := src.(statusReporting); ok {
			r.StopReporting()
		}
	}
	report := newConfigReport(logger, cfg.nodeName, cfg.tiersDir != "")
	succ = newSuccession(rt, logger, func(s source.Snapshot) { apply(logger, probes, samples, obs.requests, rt, report, s) }, stopReports)
	front := newServer(logger, succ.handler(rt, &draining), cfg.bodyReadTimeout)
	conns.limit(front)
	adminSrv := newServer(logger, handOver(readyOnceServing(admin, &serving), &draining), cfg.bodyReadTimeout)
	adminConns := newAdminConnLimits()
	adminConns.limit(adminSrv)
	// Every front-door request's context ends with requests: a second
	// signal cancels them all.
	requests, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	front.BaseContext = func(net.Listener) context.Context { return requests }

	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The handover ends after the front door shut down: the predecessor's
	// side then sends its last releases.
	handoverCtx, endHandover := context.WithCancel(context.Background())
	defer endHandover()
	// Every part sends at most one error; the channels hold them all.
	const parts = 6
	failed := make(chan error, parts)
	done := make(chan struct{}, parts)
	spawned := 0
	spawn := func(name string, f func() error) {
		spawned++
		go func() {
			defer func() { done <- struct{}{} }()
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				failed <- partError(name, err)
			}
		}()
	}
	spawn("admin", func() error { return adminSrv.Serve(adminConns.listener(adminLn)) })
	spawn("readiness", func() error { return probes.Run(runCtx) })
	reloads := make(chan apikeys.Reload, keyReloadBuffer)
	for _, w := range []struct {
		name, path string
		keys       *apikeys.Keys
	}{{"api keys", cfg.apiKeysFile, keys}, {"admin token", cfg.adminTokenFile, token}} {
		if w.keys == nil {
			continue
		}
		watch := apikeys.Watch{Path: w.path, Keys: w.keys, Interval: cfg.keysPoll, Report: func(r apikeys.Reload) {
			logKeyReload(logger, r)
			select {
			case reloads <- r:
			default:
			}
		}}
		spawn(w.name, func() error { return watch.Run(runCtx) })
	}
	firstTiers := make(chan []readiness.Tier, 1)
	var once sync.Once
	spawn("source", func() error {
		return src.Run(runCtx, func(s source.Snapshot) {
			succ.configure(s)
			once.Do(func() {
				if err := report.strictError(); cfg.strictManifests && err != nil {
					failed <- err // the front door never opens.
					return
				}
				firstTiers <- router.ReadinessTiers(s)
			})
		})
	})

	notReady := make(chan struct{})
	var runErr error
	select {
	case tiers := <-firstTiers:
		warmUp(ctx, probes, tiers)
		if ctx.Err() != nil {
			break
		}
		frontLn, err := listenOwned(ctx, cfg.listen, cfg.listen)
		if err != nil {
			runErr = fmt.Errorf("front door listener: %w", err)
			break
		}
		spawn("front door", func() error { return front.Serve(conns.listener(frontLn)) })
		succ.start(handoverCtx, frontLn.Addr().String())
		serving.Store(true)
		logger.Info("router started", "node", cfg.nodeName, "listen", frontLn.Addr().String(), "admin_listen", adminLn.Addr().String())
		if started != nil {
			started(startedRouter{front: frontLn.Addr(), admin: adminLn.Addr(), probes: probes, notReady: notReady,
				opened: succ.opened, keyReloads: reloads})
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
		logger.Info("shutting down", "grace", cfg.shutdownGrace, "timeout", cfg.shutdownTimeout)
	}
	stopHurry := context.AfterFunc(hurry, func() {
		logger.Warn("second signal: ending the drain now, in-flight requests are closed")
		endRequests()
	})
	defer stopHurry()
	admin.NotReady()
	// The router replacing this one owns the node's status from now on.
	stopReports()
	// Draining before notReady: whoever sees notReady closed must see every
	// later response tell its client to close the connection.
	draining.Store(true)
	close(notReady)
	if serving.Load() && runErr == nil && cfg.shutdownGrace > 0 {
		// Keep accepting: a router replacing this one may not listen yet,
		// and clients told to reconnect reach it once it does.
		grace := time.NewTimer(cfg.shutdownGrace)
		select {
		case <-grace.C:
		case <-hurry.Done():
		case runErr = <-failed:
		}
		grace.Stop()
	}
	shutdown(hurry, logger, front, adminSrv, cfg.shutdownTimeout)
	endHandover()
	succ.stop()
	cancel()
	probes.Close()
	samples.Close()
	for range spawned {
		<-done
	}
	logger.Info("router stopped")
	return runErr
}

// warmUp waits, at most warmUpTimeout or until ctx ends, for a probe of
// every member of tiers, so that the front door opens with its members'
// readiness known rather than every member not ready yet.
func warmUp(ctx context.Context, probes *readiness.Cache, tiers []readiness.Tier) {
	ctx, cancel := context.WithTimeout(ctx, warmUpTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range tiers {
		for _, m := range t.Members {
			wg.Go(func() {
				for {
					_, err := probes.ProbeNow(ctx, t.Key, m.ID)
					if !errors.Is(err, readiness.ErrNotRunning) {
						return
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(warmUpRetry):
					}
				}
			})
		}
	}
	wg.Wait()
}

// logKeyReload logs what a key watch reported: the file and the number of
// keys, never a key.
func logKeyReload(logger *slog.Logger, r apikeys.Reload) {
	if r.Err != nil {
		logger.Warn("key file not reloaded; the keys loaded before stay in force", "file", r.Path, "keys", r.Keys, "error", r.Err.Error())
		return
	}
	logger.Info("key file reloaded", "file", r.Path, "keys", r.Keys)
}

// handOver tells clients to reconnect once shutdown began: every response
// then carries "Connection: close", so a keep-alive client sends its next
// request on a new connection, which reaches the router replacing this one
// (see listen). Closing idle connections instead would race clients
// reusing them.
func handOver(h http.Handler, draining *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		closeWhenDraining(w, draining)
		h.ServeHTTP(w, r)
	})
}

// closeWhenDraining sets "Connection: close" on the response once draining
// is set (handOver).
func closeWhenDraining(w http.ResponseWriter, draining *atomic.Bool) {
	if draining.Load() {
		w.Header().Set("Connection", "close")
	}
}

// readyOnceServing fails /readyz until the front door listens: the admin
// listener opens first, and a router replacing another must not be taken
// for ready before it takes front door connections.
func readyOnceServing(h http.Handler, serving *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !serving.Load() {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "front door not listening yet\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// newServer returns an HTTP server for h. ReadTimeout bounds a request's
// headers and body: net/http lifts the connection's read deadline when the
// body has been read to its end (before its background read for the
// client's going away), so the timeout never cuts a response, and there is
// no write timeout: streams last as long as the engine streams, bounded by
// the tiers' idle timeouts. net/http's own error log goes to panicLog.
func newServer(logger *slog.Logger, h http.Handler, bodyReadTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       bodyReadTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(panicLog{logger}, "", 0),
	}
}

// panicPrefix starts net/http's log line for a handler's panic.
const panicPrefix = "http: panic serving "

// panicLog is net/http's error log of the router's servers. net/http writes
// a line there when a handler panics with anything but http.ErrAbortHandler,
// then closes the connection, so the client sees it closed without an
// answer: the router logs the panic and its stack at ERROR, without the
// client's address. net/http's other lines (TLS handshake errors, ...)
// quote client addresses and raw errors and are dropped.
type panicLog struct{ logger *slog.Logger }

// Write logs p if it is a panic's line.
func (l panicLog) Write(p []byte) (int, error) {
	s, ok := strings.CutPrefix(string(p), panicPrefix)
	if !ok {
		return len(p), nil
	}
	if _, rest, found := strings.Cut(s, ": "); found {
		s = rest // the client's address goes.
	}
	l.logger.Error("panic serving a request", "panic", strings.TrimSpace(s))
	return len(p), nil
}

// shutdown stops accepting, lets in-flight requests finish until the
// timeout, then closes what remains (its leases are released as the
// handlers see their clients gone). When hurry ends (a second signal,
// which cancelled every request), it waits at most hurriedShutdownTimeout
// more for their handlers to return, and does not wait for the admin
// server.
func shutdown(hurry context.Context, logger *slog.Logger, front, adminSrv *http.Server, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(hurry, timeout)
	defer cancel()
	err := front.Shutdown(ctx)
	if err != nil && hurry.Err() != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), hurriedShutdownTimeout)
		defer hcancel()
		err = front.Shutdown(hctx)
	}
	if err != nil {
		why := "in-flight requests outlived the shutdown timeout; closing them"
		if hurry.Err() != nil {
			why = "in-flight requests outlived the second signal's wait; closing them"
		}
		logger.Warn(why)
		_ = front.Close()
	}
	actx, acancel := context.WithTimeout(hurry, adminShutdownTimeout)
	defer acancel()
	if err := adminSrv.Shutdown(actx); err != nil {
		_ = adminSrv.Close()
	}
}

// apply registers the tiers the router will serve from a snapshot
// (Router.Plan) with the readiness probes and the pressure cache, applies
// the snapshot to the router, then exports the request metrics' zero
// series of those tiers and deletes the series of the tiers gone, and
// reports the result (configReport). A cache that refuses the
// registration keeps its previous one (its members read not ready or
// unknown); the error is logged.
func apply(logger *slog.Logger, probes *readiness.Cache, samples *pressure.Cache, metrics *telemetry.RequestMetrics,
	rt *router.Router, report *configReport, s source.Snapshot,
) {
	// The probes and samples follow the configuration the router will
	// serve: a tier whose new configuration it refuses keeps its old
	// members and endpoints, and a refused endpoint is never reached.
	plan := rt.Plan(s)
	if err := probes.Reconfigure(router.ReadinessTiers(plan)); err != nil {
		logger.Error("readiness probes not reconfigured", "error", err.Error())
	}
	if err := samples.Reconfigure(router.PressureTiers(plan)); err != nil {
		logger.Error("pressure cache not reconfigured", "error", err.Error())
	}
	applied := rt.Apply(s)
	metrics.Configure(plan)
	report.report(s, applied)
}

// registerPprof serves Go's profiles (net/http/pprof) at /debug/pprof/ on
// the admin listener, behind the admin token.
func registerPprof(admin *router.Admin) {
	admin.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	admin.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	admin.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	admin.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	admin.Handle("POST /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	admin.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}

// partError names the part of the router that failed, unless the error
// already starts with that name (the source's errors say "source: ..."),
// so that no message says it twice.
func partError(name string, err error) error {
	if strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}
