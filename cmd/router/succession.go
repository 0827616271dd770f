package main

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/handover"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// Bounds of the lease handover between a router and the one replacing it
// (docs/ROUTER.md#81-handing-the-ports-over).
const (
	// handoverTimeout bounds a starting router's wait for its
	// predecessor's snapshot, dial included, and so how long its front
	// door holds inference requests. Both routers run on one host and the
	// snapshot is taken under each tier's lock in microseconds; a
	// predecessor that needs seconds is stuck, and the new router then
	// serves without adopting rather than hold clients longer.
	handoverTimeout = 3 * time.Second
	// maxForwardHops bounds how often a request is forwarded from a router
	// that handed its admission over to the newest one. A rollout overlaps
	// at most three routers on a node (one draining, one handing over,
	// one starting); more hops mean the request went round in a circle
	// (no newer router listens) and it is refused.
	maxForwardHops = 3
	// forwardIdleConns bounds the idle loopback connections a router that
	// handed over keeps to its successor: enough for the keep-alive
	// clients still on it, which leave within --shutdown-grace.
	forwardIdleConns = 64
	// handoverHelloTimeout bounds the wait for the hello of a process that
	// connected to the handover channel: a successor sends it as soon as
	// it connected, over a socket on one host, in microseconds; a second
	// is ample on a loaded node and leaves the successor most of its
	// handoverTimeout for the snapshot. A peer that says nothing within
	// it is dropped, having changed nothing.
	handoverHelloTimeout = time.Second
	// maxHandoverCandidates bounds the connections of this router's uid
	// awaiting their hello at once, each for at most
	// handoverHelloTimeout: a rollout brings one successor, and a few
	// more slots keep one silent peer from shutting a real successor
	// out; further connections are closed at once.
	maxHandoverCandidates = 4
)

// errForeignPeer is returned by checkPeer for a handover channel's peer
// that runs as another uid than this router: it may neither take this
// router's admission over nor hand its own over.
var errForeignPeer = errors.New("the handover channel's peer is not a router of this uid")

// peer is the process at the other end of a handover channel, as the
// kernel recorded it (SO_PEERCRED).
type peer struct {
	uid uint32
	pid int32
}

// hopsHeader carries how often a request was forwarded to a successor. A
// router serving a request itself removes it.
const hopsHeader = "X-Sluice-Handover-Hops"

// handoverName returns the abstract unix socket name of the handover
// channel of the routers whose front door listens on addr, a resolved
// address: both routers of a node bind the same address, in the node's
// network namespace. An unspecified host ("", 0.0.0.0, [::]) names the
// channel as 127.0.0.1 does, so that ":8080" and the "[::]:8080" its
// listener reports name one channel.
func handoverName(addr string) string { return "@sluice-router/" + loopbackTarget(addr) }

// succession is a router's side of the lease handover: as a successor it
// holds inference requests until it adopted its predecessor's leases; as
// a predecessor it forwards requests to its successor once it handed its
// admission over, and freezes its configuration meanwhile.
type succession struct {
	rt         *router.Router
	log        *slog.Logger
	opened     chan struct{} // closed once inference requests may be admitted.
	openOnce   sync.Once
	forwarding atomic.Bool
	forward    *httputil.ReverseProxy // set by start.
	transport  *http.Transport        // the forward proxy's; set by start.
	handedOver func()                 // called when the admission was handed over (stops status reports).

	mu     sync.Mutex
	frozen bool
	latest *source.Snapshot // the newest snapshot received while frozen.
	apply  func(source.Snapshot)

	name         string        // the channel's abstract name; set by start.
	helloTimeout time.Duration // handoverHelloTimeout unless an option says otherwise.
	lnMu         sync.Mutex    // guards ln, stopped and successor.
	ln           net.Listener  // the channel's listener while this router holds the name.
	stopped      bool          // stop ran: no listener may be recorded.
	successor    bool          // the admission is handed over to a successor.
	owner        sync.WaitGroup
}

// successionOption changes a succession's default.
type successionOption func(*succession)

// withHelloTimeout replaces handoverHelloTimeout.
func withHelloTimeout(d time.Duration) successionOption {
	return func(s *succession) { s.helloTimeout = d }
}

// newSuccession returns the succession of rt; apply applies a snapshot,
// handedOver is called whenever this router hands its admission over.
func newSuccession(rt *router.Router, logger *slog.Logger, apply func(source.Snapshot), handedOver func(), opts ...successionOption) *succession {
	s := &succession{rt: rt, log: logger, opened: make(chan struct{}), apply: apply, handedOver: handedOver, helloTimeout: handoverHelloTimeout}
	for _, o := range opts {
		o(s)
	}
	return s
}

// open lets inference requests through.
func (s *succession) open() { s.openOnce.Do(func() { close(s.opened) }) }

// configure applies snap unless the configuration is frozen (the
// admission is handed over); a frozen router keeps the newest snapshot
// and applies it if it admits again.
func (s *succession) configure(snap source.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		s.latest = &snap
		return
	}
	s.apply(snap)
}

// freeze stops or resumes applying configuration.
func (s *succession) freeze(frozen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = frozen
	if !frozen && s.latest != nil {
		s.apply(*s.latest)
		s.latest = nil
	}
}

// handler returns the front door's handler around h (the router): once
// the admission is handed over, every request is forwarded to the
// successor; before the adoption finished, inference requests wait for it
// (GET /v1/models does not); once draining is set, every response carries
// "Connection: close" (handOver).
func (s *succession) handler(h http.Handler, draining *atomic.Bool) *frontDoor {
	return &frontDoor{s: s, next: h, draining: draining}
}

// frontDoor is the front door's handler. Its checks run in one frame, and
// the one that may wait for the adoption returns before h is called: the
// serving goroutine of a stream keeps every frame below h on its stack for
// as long as the stream lasts, and the frames of the request path, with
// the server's own, must fit in 8 KiB, or every stream's stack doubles to 16
// KiB (docs/ROUTER.md#9-performance).
type frontDoor struct {
	s        *succession
	next     http.Handler
	draining *atomic.Bool
}

// ServeHTTP serves r through the router, or forwards or refuses it.
func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	closeWhenDraining(w, f.draining)
	closeWhenChunked(w, r)
	if f.s.local(w, r) {
		f.next.ServeHTTP(w, r)
	}
}

// local reports whether this router serves r: false when r was forwarded
// to the successor, or its client went away while it waited for the
// adoption to finish.
func (s *succession) local(w http.ResponseWriter, r *http.Request) bool {
	if s.forwarding.Load() {
		s.forwardRequest(w, r)
		return false
	}
	r.Header.Del(hopsHeader)
	if r.URL.Path != "/v1/models" {
		select {
		case <-s.opened:
		default:
			select {
			case <-s.opened:
			case <-r.Context().Done():
				return false
			}
		}
	}
	return true
}

// forwardRequest forwards r unchanged to the front door's address, where
// the newest router takes it, unless it went round too often.
func (s *succession) forwardRequest(w http.ResponseWriter, r *http.Request) {
	hops, _ := strconv.Atoi(r.Header.Get(hopsHeader))
	if hops >= maxForwardHops {
		writeHandoverError(w, "no router to forward the request to")
		return
	}
	r.Header.Set(hopsHeader, strconv.Itoa(hops+1))
	s.forward.ServeHTTP(w, r)
}

// writeHandoverError answers 503 with an OpenAI error object.
func writeHandoverError(w http.ResponseWriter, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `{"error":{"message":"`+message+`","type":"service_unavailable","code":"router_handover"}}`+"\n")
}

// loopbackTarget is the address a router reaches its own front door on:
// addr with an unspecified host replaced by 127.0.0.1.
func loopbackTarget(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// start begins the succession once the front door listens on frontAddr:
// it takes the handover channel's name if free (no predecessor: requests
// pass at once), or adopts the predecessor's leases over it. The
// goroutines it starts end after stop.
func (s *succession) start(ctx context.Context, frontAddr string) {
	target := loopbackTarget(frontAddr)
	s.transport = &http.Transport{
		DialContext:         (&net.Dialer{}).DialContext,
		MaxIdleConnsPerHost: forwardIdleConns,
		DisableCompression:  true,
	}
	s.forward = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target
			pr.Out.Host = pr.In.Host
		},
		Transport:     s.transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, _ error) {
			if r.Context().Err() == nil {
				writeHandoverError(w, "the router replacing this one did not answer")
			}
		},
	}
	s.name = handoverName(frontAddr)
	ln, err := listenHandover(s.name)
	switch {
	case err == nil:
		s.open()
		s.serve(ctx, ln)
	case errors.Is(err, errHandoverNameTaken):
		s.owner.Go(func() { s.adopt(ctx) })
	default:
		s.log.Warn("no lease handover: the handover channel could not be opened", "error", err.Error())
		s.open()
	}
}

// adopt connects to the predecessor and, once it checked that the
// predecessor runs as this router's uid, adopts its leases, then takes the
// channel's name. Requests pass once the snapshot is adopted, or once the
// handover failed or was refused.
func (s *succession) adopt(ctx context.Context) {
	defer s.open()
	dctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	conn, err := dialHandover(dctx, s.name)
	if err != nil {
		s.log.Warn("no lease handover: the predecessor did not answer", "error", err.Error())
		s.takeName(ctx)
		return
	}
	p, err := checkPeer(conn)
	if err != nil {
		_ = conn.Close()
		s.log.Warn("no lease handover: the handover channel is held by a process that is not a router of this uid",
			"peer_uid", p.uid, "peer_pid", p.pid, "error", err.Error())
		s.takeName(ctx)
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(handoverTimeout))
	err = handover.Adopt(ctx, s.rt.Tiers(), conn, handover.Adoption{Adopted: func(a handover.AdoptedLeases) {
		s.log.Info("predecessor's leases adopted", "adopted", a.Adopted, "ignored", a.Ignored, "peer_pid", p.pid)
		s.open()
		s.takeName(ctx)
	}})
	switch {
	case errors.Is(err, handover.ErrBounds):
		s.log.Warn("lease handover refused: the predecessor's counts pass this router's ceilings; its leases are not adopted",
			"peer_uid", p.uid, "peer_pid", p.pid, "error", err.Error())
	case err != nil && ctx.Err() == nil:
		s.log.Warn("lease handover ended", "error", err.Error())
	default:
		s.log.Info("predecessor stopped; its remaining leases were released")
	}
	select {
	case <-s.opened:
	default:
		s.takeName(ctx)
	}
}

// takeName listens on the channel's name for a successor of this router.
func (s *succession) takeName(ctx context.Context) {
	ln, err := listenHandover(s.name)
	if err != nil {
		s.log.Warn("the handover channel could not be opened: a successor will not adopt this router's leases", "error", err.Error())
		return
	}
	s.serve(ctx, ln)
}

// serve accepts would-be successors on ln until stop or until one took
// the admission over (claim closes ln).
func (s *succession) serve(ctx context.Context, ln net.Listener) {
	if !s.setListener(ln) {
		_ = ln.Close()
		return
	}
	s.owner.Go(func() { s.accept(ctx, ln) })
}

// accept accepts connections on ln until it closes. A peer of another uid
// is closed at once (checkPeer); the others are candidates, at most
// maxHandoverCandidates at once, each awaiting its hello on its own
// goroutine, so that a silent peer does not keep a real successor out.
func (s *succession) accept(ctx context.Context, ln net.Listener) {
	slots := make(chan struct{}, maxHandoverCandidates)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		p, err := checkPeer(conn)
		if err != nil {
			_ = conn.Close()
			s.log.Warn("handover channel: a peer was refused", "peer_uid", p.uid, "peer_pid", p.pid, "error", err.Error())
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = conn.Close()
			s.log.Warn("handover channel: a peer was refused: too many peers await their hello", "peer_uid", p.uid, "peer_pid", p.pid,
				"awaiting", maxHandoverCandidates)
			continue
		}
		s.owner.Go(func() {
			defer func() { <-slots }()
			s.candidate(ctx, conn, p)
		})
	}
}

// candidate serves one peer of this router's uid: given helloTimeout to
// send a valid hello, it takes the admission over (claim) unless another
// did first. Nothing is frozen or forwarded before. When a successor that
// took the admission over leaves before this router stopped, the router
// admits again and reopens the channel.
func (s *succession) candidate(ctx context.Context, conn net.Conn, p peer) {
	_ = conn.SetReadDeadline(time.Now().Add(s.helloTimeout))
	claimed := false
	err := handover.Serve(ctx, s.rt.Tiers(), conn, handover.Gate{Hello: func() bool {
		claimed = s.claim()
		if claimed {
			s.log.Info("admission handed over to a successor; requests are forwarded to it", "peer_pid", p.pid)
		}
		return claimed
	}})
	switch {
	case ctx.Err() != nil:
		return
	case !claimed && errors.Is(err, handover.ErrSuccessorGone):
		// A starting router checks its predecessor so (listenOwned).
		s.log.Debug("handover channel: a peer left before its hello", "peer_pid", p.pid)
		return
	case !claimed:
		s.log.Warn("handover channel: a peer was refused", "peer_uid", p.uid, "peer_pid", p.pid, "error", err.Error())
		return
	case err == nil:
		return
	}
	s.forwarding.Store(false)
	s.freeze(false)
	s.log.Warn("the successor left; admitting again", "error", err.Error())
	s.lnMu.Lock()
	s.successor = false
	s.lnMu.Unlock()
	ln, err := listenHandover(s.name)
	if err != nil {
		s.log.Warn("the handover channel could not be reopened", "error", err.Error())
		return
	}
	s.serve(ctx, ln)
}

// claim hands this router's admission over to the candidate whose hello
// was valid, unless it is handed over already or the succession stopped:
// it closes the channel's listener (one successor at a time: it takes the
// name once it adopted), freezes the configuration, forwards requests
// from now on and stops status reports.
func (s *succession) claim() bool {
	s.lnMu.Lock()
	if s.successor || s.stopped {
		s.lnMu.Unlock()
		return false
	}
	s.successor = true
	if s.ln != nil {
		_ = s.ln.Close()
		s.ln = nil
	}
	s.lnMu.Unlock()
	s.freeze(true)
	s.forwarding.Store(true)
	s.handedOver()
	return true
}

// setListener records ln as the channel's listener; it returns false
// (recording nothing) when stop closed the channel already.
func (s *succession) setListener(ln net.Listener) bool {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if ln != nil && s.stopped {
		return false
	}
	s.ln = ln
	return true
}

// stop ends the succession after the front door shut down: ctx (the one
// start was given) must be cancelled by the caller first, so that the
// predecessor's side sends its last releases and the successor's side
// releases what it adopted. It closes the channel's listener and waits
// for the goroutines.
func (s *succession) stop() {
	s.lnMu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
		s.ln = nil
	}
	s.stopped = true
	s.lnMu.Unlock()
	s.owner.Wait()
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}
