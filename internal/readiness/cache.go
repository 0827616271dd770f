package readiness

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/memberpoll"
)

const (
	// DefaultInterval is the probe period when Options.Interval is zero: often
	// enough that a restarted or swapped engine is noticed within seconds,
	// rare enough that 256 members cost 128 small requests a second.
	DefaultInterval = 2 * time.Second

	// StaleIntervals is how many intervals a result stays valid. Three lets
	// two consecutive probes be lost or slow before a member drops out, and
	// no more: a member whose prober is stuck is not ready.
	StaleIntervals = 3
)

// Options configures a Cache. The zero value is usable.
type Options struct {
	// Clock is read for result ages and drives the probe ticker. Its zero
	// value (nil) is the real clock.
	Clock clock.WithTicker
	// Prober qualifies one member. Its zero value (nil) is an HTTPProber with
	// its zero value.
	Prober Prober
	// Interval is the probe period. Zero or negative means DefaultInterval.
	Interval time.Duration
	// Probed, when set, is called with the member's id after each probe's
	// result was published for Ready (or discarded), on the probing
	// goroutine and outside the Cache's locks; it must return at once. The
	// router admits requests waiting for a member that just turned ready
	// from it. Nil means no call.
	Probed func(memberID string)
	// ProbeNowWaiting, when set, is called with the member's id by
	// ProbeNow once its probe was requested and before it waits for the
	// result, on ProbeNow's goroutine; it must return at once. A caller
	// that answers probes itself (a fake Prober) waits on it to know the
	// request is registered. Nil means no call.
	ProbeNowWaiting func(memberID string)
}

// Tier registers one tier with a Cache.
type Tier struct {
	// Key identifies the tier (for example namespace/name). It must be
	// non-empty and unique within the Cache.
	Key string
	// ServedModel is the model id every member must list exactly.
	ServedModel string
	// Members are the tier's members, 1..bounds.MaxMembers with
	// unique ids.
	Members []Member
}

// Member registers one member.
type Member struct {
	// ID is the member id; it must match the ReplicaTier member id grammar.
	ID string
	// Endpoint is the member's base URL; ModelsPath is appended to it.
	Endpoint string
}

// probeTarget registers one member with the runtime.
type probeTarget struct {
	id string
	Target
}

// MemberID implements memberpoll.Member.
func (p probeTarget) MemberID() string { return p.id }

// Cache probes every registered member and keeps its latest result. Create it
// with New, register tiers with Reconfigure, and start the probes with Run.
// The Cache defines the probe and what its result means; memberpoll runs
// it. All methods are safe for concurrent use.
type Cache struct {
	clock    clock.WithTicker
	prober   Prober
	interval time.Duration
	polls    *memberpoll.Runtime[probeTarget, bool, bool]
	ran      atomic.Bool // Run was called
	// probeNowWaiting is Options.ProbeNowWaiting, or a function that does
	// nothing.
	probeNowWaiting func(memberID string)
}

// New returns a Cache with no tiers. It starts no goroutine.
func New(opts Options) *Cache {
	c := &Cache{
		clock:           cmp.Or[clock.WithTicker](opts.Clock, clock.RealClock{}),
		prober:          cmp.Or[Prober](opts.Prober, HTTPProber{}),
		interval:        cmp.Or(max(opts.Interval, 0), DefaultInterval),
		probeNowWaiting: func(string) {},
	}
	if opts.ProbeNowWaiting != nil {
		c.probeNowWaiting = opts.ProbeNowWaiting
	}
	c.polls = memberpoll.New(memberpoll.Options[probeTarget, bool, bool]{
		Clock:      c.clock,
		Collect:    c.probe,
		Project:    c.project,
		Validate:   validTarget,
		Workers:    bounds.MaxNodeMembers, // a stalled endpoint delays only its member
		RequestNew: true,
		Collected:  opts.Probed,
	})
	return c
}

// Reconfigure replaces the registered tiers atomically. The whole
// configuration is validated first; on error nothing changes. A member whose
// tier key, id, endpoint and the tier's served model are unchanged keeps its
// result and any probe in flight. Any other member starts without a result
// (not ready) and is probed at once while Run is probing; a removed or
// changed member's probe is cancelled and its result discarded.
//
// Errors: ErrInvalidServedModel, ErrInvalidEndpoint and memberpoll's
// ErrClosed and registration errors (ErrInvalidTier, ErrDuplicateTier,
// ErrTierSize, ErrTooManyMembers, ErrInvalidMember, ErrDuplicateMember).
func (c *Cache) Reconfigure(tiers []Tier) error {
	regs := make([]memberpoll.Tier[probeTarget], len(tiers))
	for i, t := range tiers {
		regs[i].Key = t.Key
		for _, m := range t.Members {
			u, _ := ModelsURL(m.Endpoint) // an invalid endpoint leaves u empty: validTarget rejects it.
			regs[i].Members = append(regs[i].Members, probeTarget{m.ID, Target{ModelsURL: u, ServedModel: t.ServedModel}})
		}
	}
	return c.polls.Reconfigure(regs)
}

func validTarget(p probeTarget) error {
	switch {
	case p.ServedModel == "":
		return ErrInvalidServedModel
	case p.ModelsURL == "":
		return ErrInvalidEndpoint
	}
	return nil
}

// probe runs one probe. It passes when the prober succeeds within
// ProbeTimeout by the Cache's clock.
func (c *Cache) probe(ctx context.Context, p probeTarget, started time.Time) bool {
	err := c.prober.Probe(ctx, p.Target)
	elapsed := c.clock.Since(started)
	return err == nil && elapsed >= 0 && elapsed <= ProbeTimeout
}

// project reads a member ready when its latest probe passed and completed at
// most StaleIntervals intervals ago (and not in the future).
func (c *Cache) project(s memberpoll.State[probeTarget, bool], now time.Time) bool {
	age := now.Sub(s.Completed)
	return s.Result && !s.Completed.IsZero() && age >= 0 && age <= StaleIntervals*c.interval
}

// Run probes every registered member at once and then every interval, and
// blocks until ctx is done or Close is called; then it cancels the probes in
// flight and waits for them to return. It returns nil after a normal stop,
// memberpoll.ErrClosed if the Cache was already closed and
// ErrAlreadyRunning on a second call.
func (c *Cache) Run(ctx context.Context) error {
	select {
	case <-c.polls.Done():
		return memberpoll.ErrClosed
	default:
	}
	if c.ran.Swap(true) {
		return ErrAlreadyRunning
	}
	// The ticker exists before the first probe so that a tick during a
	// probe is never lost.
	ticker := c.clock.NewTicker(c.interval)
	defer ticker.Stop()
	// Every member is queued before the workers start: asked after, a
	// member Reconfigure queued (RequestNew) could be probing already, and
	// the request would probe it a second time at once.
	c.polls.RequestAll()
	if err := c.polls.Start(); err != nil {
		return err
	}
	defer c.polls.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.polls.Done():
			return nil
		case <-ticker.C():
			c.polls.RequestAll()
		}
	}
}

// Ready returns, for every registered member of tier, whether it is ready
// now: its latest probe succeeded, took at most ProbeTimeout and completed at
// most StaleIntervals intervals ago. The map is new and owned by the caller.
// Ready never probes or waits; after Close every member reads not ready.
//
// Errors: memberpoll.ErrUnknownTier.
func (c *Cache) Ready(tier string) (map[string]bool, error) {
	return c.polls.Read(tier, false)
}

// ProbeNow asks for an immediate probe of the member, as Recheck does
// without marking it not ready, and waits for a probe that started after the
// call to complete; a probe already in flight is never duplicated, the
// request is served by the next one. It returns that probe's result; the
// result is also published for Ready. If ctx ends first the probe still
// completes and is published, and ctx's error is returned.
//
// Errors: ErrNotRunning (also when Run stops while waiting), ctx.Err(), and
// memberpoll's ErrClosed, ErrUnknownTier and ErrUnknownMember (also when the
// member is removed while waiting).
func (c *Cache) ProbeNow(ctx context.Context, tier, member string) (bool, error) {
	wait, err := c.polls.Request(tier, member)
	if err != nil {
		return false, err
	}
	c.probeNowWaiting(member)
	return wait(ctx)
}

// Recheck marks the member not ready at once and asks for an immediate
// probe: the member is ready again only when a probe that started after the
// call passes. A probe already in flight may still complete, but even a
// passing one leaves the member not ready. The router calls it when a
// connection to the member failed (passive ejection) and when the member is
// readmitted (docs/ROUTER.md#5-configuration-changes); it implements
// tiers.Rechecker.
//
// Recheck never blocks. It does nothing for an unknown tier or member or a
// closed Cache. Before Run the member stays not ready until the first probe
// of Run passes.
func (c *Cache) Recheck(tier, member string) {
	c.polls.Invalidate(tier, member)
}

// Close stops the Cache. It is idempotent and never blocks: probes are
// cancelled (Run returns once they have), ProbeNow waiters return
// memberpoll.ErrClosed,
// and every member reads not ready from then on.
func (c *Cache) Close() {
	c.polls.Close()
}
