package router

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apierror"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/reqbody"
	"github.com/sluice-dev/sluice/internal/sse"
	"github.com/sluice-dev/sluice/internal/tiers"
	"github.com/sluice-dev/sluice/internal/upstream"
)

// The inference routes of the front door.
const (
	pathChatCompletions = "/v1/chat/completions"
	pathCompletions     = "/v1/completions"
	pathResponses       = "/v1/responses"
	pathEmbeddings      = "/v1/embeddings"
	pathModels          = "/v1/models"
)

// maxAcquireAttempts bounds how often the router builds admission inputs for
// one request: a second attempt is made only when a reconfiguration landed
// between reading the tier's membership and Acquire (admission refuses the
// stale inputs with ErrInvalidInput, reserving nothing). It is not an
// upstream retry: no member was contacted.
const maxAcquireAttempts = 2

// DefaultMemberIdleTimeout is the default Options.MemberIdleTimeout
// (--member-idle-timeout), the member client's: below the 5 s after which
// uvicorn, vLLM's server, closes an idle keep-alive connection, so the
// router closes its idle connections first and none lingers in CLOSE_WAIT.
const DefaultMemberIdleTimeout = upstream.DefaultIdleTimeout

// Options configures a Router. The zero value serves with every member
// ready, pressure unknown, no authentication and the default body limit.
type Options struct {
	// Readiness is read for every request. Nil means every member is ready.
	Readiness tiers.ReadinessView
	// HandedOver serves a request whose tier's admission was handed over to
	// a successor router (admission.ErrHandedOver) after the request
	// arrived; its body, already read, is readable again. cmd/router
	// forwards it to the successor (docs/ROUTER.md#81-handing-the-ports-over).
	// Nil refuses such a request as a quiesced tier does.
	HandedOver func(w http.ResponseWriter, r *http.Request)
	// Rechecker is told which members must prove their readiness again
	// (docs/ROUTER.md). Nil means no member is ever rechecked: the
	// readiness probes' own period applies.
	Rechecker tiers.Rechecker
	// Pressure is read for every request to a Capacity tier, and by the
	// admin capacity view. Nil means every member's pressure is unknown.
	Pressure tiers.PressureView
	// Keys are the API keys of the inference routes. Nil means open.
	Keys *apikeys.Keys
	// TenantHeader, when set, is a request header whose one valid value
	// names the tenant of an authenticated request, at its key's priority
	// (docs/CONFIGURATION.md#41-tenants-and-priorities); check the name
	// with ParseTenantHeader. Empty means the tenant is always the key's.
	TenantHeader string
	// Authenticated is called with every request that passed the API key
	// check (with Keys nil, every request reaching it), before its body is
	// read; cmd/router marks the request's connection authenticated
	// (docs/CONFIGURATION.md#11-connection-limits). It runs on the request
	// path and must return at once. Nil calls nothing.
	Authenticated func(*http.Request)
	// MaxBodyBytes bounds a request body. Zero or negative means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBufferedBodyBytes bounds the request body bytes held at once, all
	// requests together (--max-buffered-body-bytes); a request whose body
	// does not fit is refused with 503 body_buffer_exhausted. Buffers above
	// 64 KiB may hold three quarters of it; the rest is kept for smaller
	// bodies. Zero or negative means DefaultMaxBufferedBodyBytes; a value
	// below twice MaxBodyBytes+1 is raised to it, so that a body of the
	// largest size can be read when nothing else is held.
	MaxBufferedBodyBytes int64
	// Logger receives structured logs carrying ids, never URLs, tokens,
	// prompts or bodies. Nil discards them.
	Logger *slog.Logger
	// AccessLog logs every request's line (the decision record's) at INFO
	// (--access-log). Without it a failed exchange's line is logged at
	// WARN and every other at DEBUG.
	AccessLog bool
	// Recorder receives one Outcome per inference request. Nil records
	// nothing.
	Recorder Recorder
	// Intervals takes the intervals between the content events of the
	// streams relayed (inter-token latency). Nil records none, and the
	// router does not time them.
	Intervals IntervalRecorder
	// TLSConfig is the client configuration of connections to https
	// members; its ServerName defaults to the endpoint's host. Nil means
	// Go's defaults with the system's roots.
	TLSConfig *tls.Config
	// Clock times requests for Outcome. When it also implements
	// clock.WithTicker (clocktesting.FakeClock does), it drives the member
	// connections' idle timeout as well. Nil means the real clock.
	Clock clock.PassiveClock
	// MemberIdleTimeout closes a member connection that stayed idle that
	// long (--member-idle-timeout); keep it below the engines' own
	// keep-alive timeout. Zero or negative means DefaultMemberIdleTimeout.
	MemberIdleTimeout time.Duration
	// Upstream are options of the member client (upstream.New), applied
	// after those TLSConfig, MemberIdleTimeout and Clock make. Nil adds
	// none.
	Upstream []upstream.Option
	// OnRelease is called after every admission.Lease.Release the router
	// makes, exactly once per admitted request, with the lease's tier and
	// member, on the goroutine that released it: the moment a member's
	// slot is free again. It runs on the request path. Nil calls nothing.
	OnRelease func(tier, member string)
	// AdmissionOptions are added to the options of every tier's admission
	// owner the router creates (admission.New), such as
	// admission.WithQueued. Nil adds none.
	AdmissionOptions []admission.Option
	// TracerProvider, when set, traces every inference request: one server
	// span continuing the caller's W3C trace context, whose context the
	// upstream request carries (docs/OPERATIONS.md#tracing). Nil means no
	// tracing: no span is started and no header added.
	TracerProvider trace.TracerProvider
	// PassEngineHeaders names engine response headers to let through that
	// the router strips by default (StrippedEngineHeaders), canonical forms
	// as ParsePassEngineHeaders returns them (--pass-engine-headers). Nil
	// strips them all; a name the router does not strip has no effect.
	PassEngineHeaders []string
	// HostAddrs returns this host's addresses (tiers.Options.HostAddrs).
	// Nil means tiers.InterfaceAddrs.
	HostAddrs tiers.HostAddrs
}

// Router is the front door of one node: it serves the inference routes and
// GET /v1/models as an http.Handler over the tiers in force (Tiers, which
// applies source snapshots). Create it with New. All methods are safe for
// concurrent use.
type Router struct {
	tiers      *tiers.Set
	recheck    tiers.Rechecker
	handedOver func(http.ResponseWriter, *http.Request)
	keys       *apikeys.Keys
	authed     func(*http.Request) // Options.Authenticated; nil calls nothing.
	maxBody    int64
	bodies     *reqbody.Budget
	log        *slog.Logger
	accessLog  slog.Level // the level of a request line whose exchange did not fail.
	recorder   Recorder
	intervals  IntervalRecorder
	members    *upstream.Client
	clock      clock.PassiveClock
	ids        *idGenerator
	tracer     trace.Tracer // nil unless Options.TracerProvider is set.
	// stripHeaders are the engine response headers removed from every
	// response (strippedEngineHeaders less Options.PassEngineHeaders).
	stripHeaders []string
	// tenantHeader is Options.TenantHeader in canonical form; "" is off.
	tenantHeader string

	onRelease func(tier, member string) // Options.OnRelease; nil calls nothing.
}

// New returns a Router with no tiers; it answers every model with 404 until
// the first snapshot is applied to its Tiers.
func New(opts Options) *Router {
	rt := &Router{
		recheck:    opts.Rechecker,
		handedOver: opts.HandedOver,
		keys:       opts.Keys,
		authed:     opts.Authenticated,
		maxBody:    opts.MaxBodyBytes,
		log:        opts.Logger,
		accessLog:  slog.LevelDebug,
		recorder:   opts.Recorder,
		intervals:  opts.Intervals,
		clock:      opts.Clock,
		ids:        newIDGenerator(),
		onRelease:  opts.OnRelease,
		tracer:     newTracer(opts.TracerProvider),

		stripHeaders: engineHeadersToStrip(opts.PassEngineHeaders),
		tenantHeader: http.CanonicalHeaderKey(opts.TenantHeader),
	}
	if rt.maxBody <= 0 {
		rt.maxBody = DefaultMaxBodyBytes
	}
	budget := opts.MaxBufferedBodyBytes
	if budget <= 0 {
		budget = DefaultMaxBufferedBodyBytes
	}
	rt.bodies = reqbody.NewBudget(max(budget, 2*(rt.maxBody+1)))
	if rt.log == nil {
		rt.log = slog.New(slog.DiscardHandler)
	}
	if opts.AccessLog {
		rt.accessLog = slog.LevelInfo
	}
	if rt.clock == nil {
		rt.clock = clock.RealClock{}
	}
	ticker, _ := rt.clock.(clock.WithTicker)
	rt.members = upstream.New(append([]upstream.Option{upstream.WithTLSConfig(opts.TLSConfig),
		upstream.WithIdleTimeout(opts.MemberIdleTimeout), upstream.WithClock(ticker)}, opts.Upstream...)...)
	rt.tiers = tiers.New(tiers.Options{Readiness: opts.Readiness, Rechecker: opts.Rechecker, Pressure: opts.Pressure,
		HostAddrs: opts.HostAddrs, Clock: rt.clock, AdmissionOptions: opts.AdmissionOptions, Logger: rt.log,
		// A reconfiguration closes the idle connections of members no
		// longer served.
		Retain: rt.members.CloseIdleExcept})
	return rt
}

// Tiers returns the tiers the router serves: apply source snapshots to it
// (tiers.Set.Plan, tiers.Set.Apply); the admin API and the hand-over read
// it.
func (rt *Router) Tiers() *tiers.Set { return rt.tiers }

// BufferedBodyBytes returns the capacity of the request body buffers held
// now, all requests together, and the budget for them
// (Options.MaxBufferedBodyBytes).
func (rt *Router) BufferedBodyBytes() (held, limit int64) {
	return rt.bodies.InUse(), rt.bodies.Limit()
}

// Close closes the idle upstream connections and stops the timer that
// closes them after MemberIdleTimeout. In-flight requests are not touched;
// stop the HTTP server first. Close is idempotent.
func (rt *Router) Close() { rt.members.Close() }

// ServeHTTP serves the front door routes.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case pathChatCompletions, pathCompletions, pathResponses, pathEmbeddings:
		// The gates and admission, in the order of
		// docs/ROUTER.md#2-request-path, then the exchange: the single
		// upstream attempt, from the lease to its release.
		if ex := rt.admit(w, r); ex != nil && ex.serve(w, r) {
			// The member never saw the request: admission once more,
			// without it (docs/ROUTER.md#a-request-the-engine-cannot-have-seen).
			if ex = rt.readmit(w, r, ex); ex != nil {
				ex.serve(w, r)
			}
		}
	case pathModels:
		rt.serveModels(w, r)
	default:
		errRouteNotFound.Write(w)
	}
}

// contentFields returns the content keys of a route's responses; zero for
// a route that generates none (embeddings).
func contentFields(path string) sse.Fields {
	switch path {
	case pathChatCompletions:
		return sse.ChatFields
	case pathCompletions:
		return sse.CompletionFields
	case pathResponses:
		return sse.ResponseFields
	}
	return 0
}

// allowPost is the Allow header of the inference routes.
var allowPost = []string{http.MethodPost}

// allowGet is the Allow header of GET /v1/models.
var allowGet = []string{http.MethodGet}

// serveModels lists the node's aliases.
func (rt *Router) serveModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header()["Allow"] = allowGet
		errMethodNotAllowed.Write(w)
		return
	}
	if !rt.keys.Allow(r) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		errUnauthorized.Write(w)
		return
	}
	if rt.authed != nil {
		rt.authed(r)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(rt.tiers.Table().Models())
}

// admit runs the gates and admission of one inference request and returns
// its exchange, or nil when it answered the request itself. It returns
// before the exchange is served, so that its frame, the largest of the
// request path, is not under the exchange's: the deepest call of a stream,
// the server writing the response head, must fit in the serving goroutine's
// 8 KiB (docs/ROUTER.md#9-performance).
func (rt *Router) admit(w http.ResponseWriter, r *http.Request) *exchange {
	o := Outcome{Start: rt.clock.Now(), RequestID: rt.ids.requestID(r.Header)}
	idHeader := []string{o.RequestID} // shared by the response and the upstream request; never appended to.
	w.Header()[headerRequestID] = idHeader
	if rt.tracer != nil {
		o.trace = rt.startTrace(r, &o)
	}

	// 1. Request-wide gates, before any reservation.
	if r.Method != http.MethodPost {
		w.Header()["Allow"] = allowPost
		rt.refuse(w, &o, ResultRefused, errMethodNotAllowed)
		return nil
	}
	fromKey, ok := rt.keys.Authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		rt.refuse(w, &o, ResultRefused, errUnauthorized)
		return nil
	}
	if rt.authed != nil {
		rt.authed(r)
	}
	who := rt.tenantOf(r, fromKey)
	buf, err := reqbody.Read(r, rt.maxBody, rt.bodies)
	if err != nil {
		e := errBadRequest
		switch {
		case errors.Is(err, reqbody.ErrTooLarge):
			e = errTooLarge // it closes the connection: the rest of the body is not read.
		case errors.Is(err, reqbody.ErrBudget):
			e = errBodyBufferExhausted
			w.Header().Set("Connection", "close")
		}
		rt.refuse(w, &o, ResultRefused, e)
		return nil
	}
	held := heldBodies{buf}
	defer held.release()
	body := buf.Bytes()
	model, ok := reqbody.FindModel(body)
	if !ok {
		rt.refuse(w, &o, ResultRefused, errBadRequest)
		return nil
	}
	alias, ts, ok := rt.tiers.Table().Alias(model.Name())
	if !ok {
		rt.refuse(w, &o, ResultRefused, errModelNotFound)
		return nil
	}
	// The buffer of the body's copy that names the tier's servedModel is
	// charged to the body budget here, still a gate: a refusal reserves
	// nothing. The copy is made only once the request is admitted.
	if n := reqbody.RewriteSize(ts.Config().UpstreamModel(), body, model); n > 0 {
		if held[1], err = reqbody.NewBuffer(rt.bodies, n, false); err != nil {
			rt.refuse(w, &o, ResultRefused, errBodyBufferExhausted)
			return nil
		}
	}
	o.Alias, o.Tier = alias, ts.Key()
	w.Header()[headerTier] = ts.Header()

	// 2 and 3. Completed snapshots, then one admission decision; with a
	// queue, the request may wait for it.
	lease, cfg, err := rt.acquire(r.Context(), ts, who, "", &o)
	if err != nil {
		rt.notAdmitted(w, r, body, &o, err)
		return nil
	}
	// 4 and 5. Exactly one upstream attempt; the lease is released when it
	// ends, however it ends.
	route := rt.leased(ts, cfg, lease, &o)
	// The member serves the tier's servedModel, not the alias. A tier
	// reconfigured since the gate may need more room than was reserved
	// there.
	body = held.rewrite(rt.bodies, model, cfg.UpstreamModel())
	ex := rt.newExchange(ts, cfg, who, route, lease, &o, held, body, idHeader, r)
	held = heldBodies{} // the exchange releases them now.
	return rt.begin(w, ex)
}

// newExchange returns the exchange of a request admitted to route's member
// under cfg, which takes over the body buffers held.
func (rt *Router) newExchange(ts *tiers.Tier, cfg *tiers.Config, who admission.Tenant, route *tiers.Member, lease *admission.Lease,
	o *Outcome, held heldBodies, body []byte, idHeader []string, r *http.Request,
) *exchange {
	return &exchange{rt: rt, tier: ts, who: who, route: route, lease: lease, outcome: *o, body: body, held: held,
		idHeader: idHeader, headerTimeout: cfg.HeaderTimeout(), idleTimeout: cfg.IdleTimeout(), in: r.Context(),
		fields: contentFields(r.URL.Path)}
}

// leased records the admission of lease on o and returns the route to its
// member: in cfg, the configuration the decision was made on, or in the
// tier's newer one when a reconfiguration landed between the configuration
// read and the decision.
func (rt *Router) leased(ts *tiers.Tier, cfg *tiers.Config, lease *admission.Lease, o *Outcome) *tiers.Member {
	route := cfg.Member(lease.Member())
	if route == nil {
		route = ts.Config().Member(lease.Member())
	}
	o.Result, o.Member = ResultAdmitted, lease.Member()
	o.Dispatch = rt.clock.Since(o.Start)
	if rt.recorder != nil || o.trace != nil {
		o.Selection = lease.Selection()
	}
	return route
}

// begin readies ex, just built for its lease, to be served: it names the
// member to the client and starts timing the stream's intervals. It
// returns nil when it answered the request itself.
func (rt *Router) begin(w http.ResponseWriter, ex *exchange) *exchange {
	if rt.intervals != nil && ex.fields != 0 {
		ex.intervals = rt.intervals.Intervals(ex.tier.Key(), ex.outcome.Member)
	}
	if ex.route == nil {
		ex.held.release()
		// Unreachable: a lease names a member of the configuration it was
		// acquired under. Answer as an upstream failure rather than crash.
		if e := ex.failed(errNoRoute); e != nil {
			e.Write(w)
		}
		ex.outcome.Duration = rt.clock.Since(ex.outcome.Start)
		rt.finish(&ex.outcome)
		return nil
	}
	w.Header()[headerMember] = ex.route.Header()
	return ex
}

// acquire builds the admission inputs of ts from completed snapshots and
// makes one admission decision for who, which waits in the tier's queue
// when it has one and is full (a second only when the tier was
// reconfigured between the two, see maxAcquireAttempts). A member named by
// without is not ready in the inputs: a request it never saw does not go
// back to it (readmit). It records the time spent deciding and waiting on
// o, and returns the configuration the inputs were built from.
func (rt *Router) acquire(ctx context.Context, ts *tiers.Tier, who admission.Tenant, without string, o *Outcome) (*admission.Lease, *tiers.Config, error) {
	scheduled := rt.clock.Now()
	var err error
	var waited admission.Waited
	for range maxAcquireAttempts {
		cfg := ts.Config()
		in := rt.tiers.Inputs(ts, cfg)
		if without != "" {
			in.Ready = withoutMember(in.Ready, without)
		}
		var lease *admission.Lease
		lease, waited, err = ts.Admission().Wait(ctx, in, who)
		if !errors.Is(err, admission.ErrInvalidInput) {
			o.recordAdmission(rt.clock.Since(scheduled), waited, err)
			return lease, cfg, err
		}
	}
	o.recordAdmission(rt.clock.Since(scheduled), waited, err)
	return nil, nil, err
}

// notAdmitted answers a request admission did not admit: one whose tier
// was handed over goes to the successor, body and all; one whose client
// left while it waited gets nothing; any other gets the refusal.
func (rt *Router) notAdmitted(w http.ResponseWriter, r *http.Request, body []byte, o *Outcome, err error) {
	switch {
	case errors.Is(err, admission.ErrHandedOver) && rt.handedOver != nil:
		// The tier's admission moved to the router replacing this one
		// after the request arrived.
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rt.handedOver(w, r)
		rt.endHandedOver(o)
	case errors.Is(err, admission.ErrClientGone):
		// Nobody reads an answer.
		o.Result, o.Code, o.Status = ResultNotAdmitted, string(QueueClientGone), StatusClientClosedRequest
		o.Duration = rt.clock.Since(o.Start)
		rt.finish(o)
	default:
		rt.refuse(w, o, ResultNotAdmitted, refusalError(err))
	}
}

// refusalError maps an admission refusal to the router's errors: 429 for a
// full queue, 503 for the others.
func refusalError(err error) *apierror.Error {
	switch {
	case errors.Is(err, admission.ErrQueueFull):
		return errQueueFull
	case errors.Is(err, admission.ErrQueueTimeout):
		return errQueueTimeout
	case errors.Is(err, admission.ErrQueueHandedOver):
		return errQueueHandedOver
	case errors.Is(err, admission.ErrTierFull):
		return errCapacityExhausted
	case errors.Is(err, admission.ErrTierQuiesced):
		return errTierQuiesced
	}
	return errNoEligibleMember
}

// refuse answers a request the router itself ends and records it.
func (rt *Router) refuse(w http.ResponseWriter, o *Outcome, result Result, e *apierror.Error) {
	e.Write(w)
	o.Result, o.Code, o.Status = result, e.Code, e.Status
	o.Duration = rt.clock.Since(o.Start)
	rt.finish(o)
}

// finish ends one request's span, then logs and records its outcome: the
// line first, so that once an outcome is recorded its line is logged.
func (rt *Router) finish(o *Outcome) {
	if o.trace != nil {
		o.trace.end(o)
	}
	ctx := context.Background()
	level := rt.accessLog
	if o.End != "" && o.End != EndComplete && o.End != EndClientGone {
		level = slog.LevelWarn
	}
	if rt.log.Enabled(ctx, level) {
		// The access line is the decision record's line: the same nine
		// attributes as ever, plus three for a valid Capacity selection.
		rec := o.Evidence()
		var attrs [evidence.LineAttrs]slog.Attr
		rt.log.LogAttrs(ctx, level, "request", rec.AppendAttrs(attrs[:0])...)
	}
	if rt.recorder != nil {
		rt.recorder.Record(*o)
	}
}

// readmit admits once more a request whose first member never saw it
// (exchange.notSent: the connection was refused, or a fresh one reset
// before the first request byte was written). The first exchange's lease
// is released and its member ejected already. The request goes through
// admission again with that member left out (reacquire) and gets a new
// exchange, which is never admitted a third time. Like the first admission
// it may wait in the tier's queue; when admission refuses, the client gets
// that refusal (503 or 429 with Retry-After), as any request admission
// refuses. The request's body buffers move from ex to the new
// exchange, or are released here. It returns nil when it answered the
// request itself (docs/ROUTER.md#a-request-the-engine-cannot-have-seen).
func (rt *Router) readmit(w http.ResponseWriter, r *http.Request, ex *exchange) *exchange {
	o := ex.outcome
	// The first attempt's fields; the member stays in NotSentMember.
	o.Result, o.Member, o.Dispatch, o.Selection = "", "", 0, nil
	held := ex.held
	ex.held = heldBodies{}
	defer held.release()
	ts := ex.tier
	delete(w.Header(), headerMember)

	lease, cfg, err := rt.acquire(ex.in, ts, ex.who, o.NotSentMember, &o)
	if err != nil {
		rt.notAdmitted(w, r, held[0].Bytes(), &o, err)
		return nil
	}
	route := rt.leased(ts, cfg, lease, &o)
	model, _ := reqbody.FindModel(held[0].Bytes()) // the body passed this check in admit.
	body := held.rewrite(rt.bodies, model, cfg.UpstreamModel())
	next := rt.newExchange(ts, cfg, ex.who, route, lease, &o, held, body, ex.idHeader, r)
	next.readmitted = true
	held = heldBodies{} // the new exchange releases them now.
	return rt.begin(w, next)
}

// withoutMember returns a copy of ready with member not ready, or ready
// itself when it does not name member (a reconfiguration dropped it).
func withoutMember(ready map[string]bool, member string) map[string]bool {
	if !ready[member] {
		return ready
	}
	out := maps.Clone(ready)
	out[member] = false
	return out
}
