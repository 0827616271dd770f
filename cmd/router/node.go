package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/frontdoor"
	"github.com/sluice-dev/sluice/internal/nodeconfig"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/telemetry"
)

// node is one router process, built by newNode before any part runs: the
// router with its caches, keys, evidence and tracing, the tier source, the
// two servers and the succession. run starts its parts (start), opens the
// front door (serve), drains it (beginDrain, grace) and stops it (stop);
// close releases what newNode built.
type node struct {
	cfg     config
	log     *slog.Logger
	keys    apiKeys
	obs     *observability
	traces  *tracing
	probes  *readiness.Cache
	samples *pressure.Cache
	rt      *router.Router
	admin   *adminserver.Admin
	src     tierSource
	report  *configReport
	succ    *succession

	conns, adminConns *connLimits
	front             *frontdoor.Server
	adminSrv          *http.Server
	adminLn           net.Listener

	// endRequests ends every front-door request's context: a second signal
	// cancels them all.
	endRequests context.CancelFunc
	// partsCtx ends when the parts are to stop, after the front door shut
	// down.
	partsCtx  context.Context
	stopParts context.CancelFunc
	// handover ends after the front door shut down: the predecessor's side
	// then sends its last releases.
	handover    context.Context
	endHandover context.CancelFunc

	serving  atomic.Bool   // the front door listens.
	draining atomic.Bool   // shutdown began: responses tell clients to reconnect.
	notReady chan struct{} // closed once shutdown made /readyz fail.

	closers []func() // what close runs, last first.
}

// newNode builds the router's parts and opens the admin listener; nothing
// runs yet. On error it releases what it built.
func newNode(ctx context.Context, cfg config, logger *slog.Logger) (*node, error) {
	n := &node{cfg: cfg, log: logger, notReady: make(chan struct{})}
	if err := n.build(ctx); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// build builds n's parts in the order they depend on each other.
func (n *node) build(ctx context.Context) error {
	var err error
	if n.keys, err = loadAPIKeys(n.cfg, n.log); err != nil {
		return err
	}
	if n.obs, err = newObservability(n.cfg); err != nil {
		return err
	}
	n.closers = append(n.closers, func() { n.obs.close(n.log) })
	tracingCfg, err := tracingFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if n.traces, err = newTracing(ctx, tracingCfg, n.log); err != nil {
		return err
	}
	// After the front door shut down (close runs the last added first).
	n.closers = append(n.closers, func() { n.traces.shutdown(n.log) })
	n.newRouter()
	n.admin = adminserver.New(n.rt.Tiers(), adminserver.Options{Token: n.keys.admin, ReadyWithoutTiers: n.cfg.readyWithoutTiers})
	n.obs.register(n.admin, n.rt, n.samples, telemetry.NewConnectionCollector(n.conns.counts))
	if n.cfg.enablePprof {
		registerPprof(n.admin)
	}
	if n.src, err = newTierSource(n.cfg, n.log, n.admin); err != nil {
		return err
	}
	if n.adminLn, err = listenOwned(ctx, n.cfg.adminListen, n.cfg.listen); err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	n.newServers()
	return nil
}

// newRouter builds the readiness probes, the pressure cache and the router
// they feed.
func (n *node) newRouter() {
	// After each probe, requests waiting in a tier's queue go to a member
	// that just turned ready (rt is set below, before the probes run).
	var dispatcher atomic.Pointer[router.Router]
	n.probes = readiness.New(readiness.Options{Probed: func(string) {
		if rt := dispatcher.Load(); rt != nil {
			rt.Tiers().Dispatch()
		}
	}})
	n.samples = pressure.New(pressure.Options{Collector: n.obs.collector()})
	n.closers = append(n.closers, n.samples.Close)
	n.conns = newConnLimits(n.cfg.maxConns, n.cfg.maxUnauthConns)
	n.rt = router.New(router.Options{
		Readiness:         n.probes,
		Rechecker:         n.probes,
		MemberIdleTimeout: n.cfg.memberIdleTimeout,
		HostAddrs:         hostAddrs(),
		// A request that reached admission after the handover goes to the
		// successor too (succ is set by newServers, before the front door
		// opens).
		HandedOver:           func(w http.ResponseWriter, r *http.Request) { n.succ.forwardRequest(w, r) },
		Pressure:             n.samples,
		Keys:                 n.keys.front,
		TenantHeader:         n.cfg.tenantHeader,
		Authenticated:        n.conns.authenticated,
		MaxBodyBytes:         n.cfg.maxBodyBytes,
		MaxBufferedBodyBytes: n.cfg.maxBufferedBodies,
		Logger:               n.log,
		PassEngineHeaders:    n.cfg.passEngineHeaders,
		AccessLog:            n.cfg.accessLog,
		Recorder:             n.obs.recorder(),
		Intervals:            n.obs.requests,
		TracerProvider:       n.traces.provider(),
	})
	n.closers = append(n.closers, n.rt.Close)
	dispatcher.Store(n.rt)
}

// newServers builds the succession, which applies every snapshot
// (nodeconfig's order, then the report), and the two servers with their
// connection limits, and the contexts the run ends.
func (n *node) newServers() {
	applier := nodeconfig.Applier{Tiers: n.rt.Tiers(), Readiness: n.probes, Pressure: n.samples, Metrics: n.obs.requests}
	n.report = newConfigReport(n.log, n.cfg.nodeName, n.cfg.tiersDir != "")
	n.succ = newSuccession(n.rt, n.log, func(s source.Snapshot) { n.apply(applier, s) }, n.stopReports)
	n.front = newFrontDoor(n.log, n.succ.handler(n.rt, &n.draining), n.cfg.bodyReadTimeout)
	n.front.ConnContext, n.front.ConnState = n.conns.connContext, n.conns.connState
	n.adminSrv = newServer(n.log, handOver(readyOnceServing(n.admin, &n.serving), &n.draining), n.cfg.bodyReadTimeout)
	n.adminConns = newAdminConnLimits()
	n.adminConns.limit(n.adminSrv)
	requests, endRequests := context.WithCancel(context.Background())
	n.front.BaseContext = func(net.Listener) context.Context { return requests }
	n.partsCtx, n.stopParts = context.WithCancel(context.Background())
	n.handover, n.endHandover = context.WithCancel(context.Background())
	n.endRequests = endRequests
	n.closers = append(n.closers, endRequests, n.stopParts, n.endHandover)
}

// apply applies s in nodeconfig's order, logs a cache that refused its
// registration (it keeps its previous one: its members read not ready or
// unknown), and reports the result (configReport).
func (n *node) apply(applier nodeconfig.Applier, s source.Snapshot) {
	r := applier.Apply(s)
	if r.Readiness != nil {
		n.log.Error("readiness probes not reconfigured", "error", r.Readiness.Error())
	}
	if r.Pressure != nil {
		n.log.Error("pressure cache not reconfigured", "error", r.Pressure.Error())
	}
	n.report.report(s, r.Applied)
}

// stopReports stops the kube source's status reports: the router replacing
// this one owns the node's status from then on.
func (n *node) stopReports() {
	if r, ok := n.src.(statusReporting); ok {
		r.StopReporting()
	}
}

// close releases what newNode built, last built first: the contexts, the
// router, the pressure cache, then the tracing provider (flushed after the
// front door shut down) and the decision log's file.
func (n *node) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}
