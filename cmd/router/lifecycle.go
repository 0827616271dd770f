package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// The warm-up's bounds.
const (
	// warmUpTimeout bounds the wait, before the front door listens, for a
	// first probe of every member: a probe takes at most
	// readiness.ProbeTimeout, and the prober's own first probe may run
	// before the one the router asks for.
	warmUpTimeout = 3 * readiness.ProbeTimeout
	// warmUpRetry is how soon the warm-up asks again for a probe when the
	// probers have not started yet (they start on their own goroutine).
	warmUpRetry = 10 * time.Millisecond
)

// firstSnapshot is what the source's first snapshot, once applied, tells
// serve: the tiers to warm up, or the error that keeps the front door shut
// (--strict-manifests).
type firstSnapshot struct {
	tiers  []readiness.Tier
	strict error
}

// start runs the admin server, the readiness probes, the key watches and
// the tier source as parts of p, until n.stop. Every snapshot goes to the
// succession, which applies it; the returned channel receives the first
// once it was applied.
func (n *node) start(p *parts) <-chan firstSnapshot {
	p.run("admin", func() error { return n.adminSrv.Serve(n.adminConns.listener(n.adminLn)) })
	p.run("readiness", func() error { return n.probes.Run(n.partsCtx) })
	n.keys.watch(n.partsCtx, p, n.cfg, n.log)
	first := make(chan firstSnapshot, 1)
	var once sync.Once
	p.run("source", func() error {
		return n.src.Run(n.partsCtx, func(s source.Snapshot) {
			n.succ.configure(s)
			once.Do(func() {
				f := firstSnapshot{tiers: tiers.ReadinessTiers(s)}
				if err := n.report.strictError(); n.cfg.strictManifests && err != nil {
					f = firstSnapshot{strict: err} // the front door never opens.
				}
				first <- f
			})
		})
	})
	return first
}

// serve opens the front door once the first snapshot was applied and its
// members probed (openFrontDoor), then serves until ctx ends (nil) or a
// part fails (its error). An error that kept the front door shut ends it
// at once.
func (n *node) serve(ctx context.Context, p *parts, first <-chan firstSnapshot, started func(startedRouter)) error {
	if err := n.openFrontDoor(ctx, p, first, started); err != nil || ctx.Err() != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-p.failed.Done():
		return p.failure()
	}
}

// openFrontDoor waits for the first snapshot, warms the probes up, listens
// on the front door, runs it as a part of p and starts the succession;
// then calls started, when set. It returns nil without opening when ctx
// ended first, and the error when a part failed first, the first snapshot
// is not valid under --strict-manifests, or the listener failed.
func (n *node) openFrontDoor(ctx context.Context, p *parts, first <-chan firstSnapshot, started func(startedRouter)) error {
	var f firstSnapshot
	select {
	case f = <-first:
	case <-ctx.Done():
		return nil
	case <-p.failed.Done():
		return p.failure()
	}
	if f.strict != nil {
		return f.strict
	}
	warmUp(ctx, n.probes, f.tiers)
	if ctx.Err() != nil {
		return nil
	}
	frontLn, err := listenOwned(ctx, n.cfg.listen, n.cfg.listen)
	if err != nil {
		return fmt.Errorf("front door listener: %w", err)
	}
	p.run("front door", func() error { return n.front.Serve(n.conns.listener(frontLn)) })
	n.succ.start(n.handover, frontLn.Addr().String())
	n.serving.Store(true)
	n.log.Info("router started", "node", n.cfg.nodeName, "listen", frontLn.Addr().String(), "admin_listen", n.adminLn.Addr().String())
	if started != nil {
		started(startedRouter{front: frontLn.Addr(), admin: n.adminLn.Addr(), probes: n.probes, notReady: n.notReady,
			opened: n.succ.opened, keyReloads: n.keys.reloads})
	}
	return nil
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

// beginDrain begins the shutdown: /readyz fails, the status reports stop
// (the router replacing this one owns the node's status from now on), and
// every later response tells its client to close the connection.
func (n *node) beginDrain() {
	n.admin.NotReady()
	n.stopReports()
	// Draining before notReady: whoever sees notReady closed must see every
	// later response tell its client to close the connection.
	n.draining.Store(true)
	close(n.notReady)
}

// grace keeps the front door accepting for --shutdown-grace, when it
// listens: a router replacing this one may not listen yet, and clients
// told to reconnect reach it once it does. It ends early at a second
// signal (hurry) or when a part fails, and returns that failure.
func (n *node) grace(hurry context.Context, p *parts) error {
	if !n.serving.Load() || n.cfg.shutdownGrace <= 0 {
		return nil
	}
	grace := time.NewTimer(n.cfg.shutdownGrace)
	defer grace.Stop()
	select {
	case <-grace.C:
	case <-hurry.Done():
	case <-p.failed.Done():
		return p.failure()
	}
	return nil
}

// stop shuts the servers down (shutdown), ends the succession, then stops
// the parts and the caches; run then waits for the parts.
func (n *node) stop(hurry context.Context) {
	shutdown(hurry, n.log, n.front, n.adminSrv, n.cfg.shutdownTimeout)
	n.endHandover()
	n.succ.stop()
	n.stopParts()
	n.probes.Close()
	n.samples.Close()
}
