package readiness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
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

	// MaxMembers bounds the members registered across all tiers. Each member
	// has one prober goroutine, so this bounds the goroutines too; it is the
	// router-wide member bound (docs/CONFIGURATION.md#1-router-flags).
	MaxMembers = bounds.MaxNodeMembers

	// MaxTierMembers is the largest tier, the ReplicaTier API bound.
	MaxTierMembers = bounds.MaxMembers

	// maxMemberIDLength is the ReplicaTier member id grammar's length bound.
	maxMemberIDLength = 32
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
}

// Tier registers one tier with a Cache.
type Tier struct {
	// Key identifies the tier (for example namespace/name). It must be
	// non-empty and unique within the Cache.
	Key string
	// ServedModel is the model id every member must list exactly.
	ServedModel string
	// Members are the tier's members, 1..MaxTierMembers with unique ids.
	Members []Member
}

// Member registers one member.
type Member struct {
	// ID is the member id; it must match the ReplicaTier member id grammar.
	ID string
	// Endpoint is the member's base URL; ModelsPath is appended to it.
	Endpoint string
}

// Cache probes every registered member and keeps its latest result. Create it
// with New, register tiers with Reconfigure, and start the probes with Run.
// All methods are safe for concurrent use.
type Cache struct {
	clock    clock.WithTicker
	prober   Prober
	interval time.Duration

	mu      sync.Mutex
	tiers   map[string]*tierState
	closed  bool
	started bool               // Run was called
	runCtx  context.Context    // set while Run is probing; nil before and after
	stopRun context.CancelFunc // cancels runCtx
	runDone chan struct{}      // closed when Run stops probing
	wg      sync.WaitGroup     // prober goroutines

	// probed, when set (tests only), is called by a prober after each probe
	// has been published or discarded, outside the lock.
	probed func(memberID string)
	// probeNowWaits, when set (tests only), is called under the lock when
	// ProbeNow starts waiting for its probe; it must not block.
	probeNowWaits func(memberID string)
}

type tierState struct {
	members []*member
}

// member is one registered member. id and target are fixed; a changed
// configuration replaces the member. The other fields are guarded by
// Cache.mu.
type member struct {
	id     string
	target Target

	ready    bool      // result of the latest completed probe
	at       time.Time // when it completed; zero: no result yet
	started  uint64    // probes started
	finished uint64    // sequence number of the latest completed probe
	// rechecked is the value of started at the latest Recheck: a probe with
	// a sequence number up to it started before the Recheck and cannot make
	// the member ready.
	rechecked uint64
	changed   chan struct{}
	wake      chan struct{} // capacity 1: a ProbeNow or Recheck request
	cancel    context.CancelFunc
	gone      chan struct{} // closed when removed or the cache closes
}

// New returns a Cache with no tiers. It starts no goroutine.
func New(opts Options) *Cache {
	c := &Cache{
		clock:    opts.Clock,
		prober:   opts.Prober,
		interval: opts.Interval,
		tiers:    map[string]*tierState{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.prober == nil {
		c.prober = HTTPProber{}
	}
	if c.interval <= 0 {
		c.interval = DefaultInterval
	}
	return c
}

// Reconfigure replaces the registered tiers atomically. The whole
// configuration is validated first; on error nothing changes. A member whose
// tier key, id, endpoint and the tier's served model are unchanged keeps its
// result and its prober. Any other member starts without a result (not
// ready); a removed or changed member's prober is stopped and its in-flight
// result discarded. While Run is probing, new members' probers start at once.
//
// Errors: ErrClosed, ErrInvalidTier, ErrDuplicateTier, ErrInvalidServedModel,
// ErrTierSize, ErrTooManyMembers, ErrInvalidMember, ErrDuplicateMember and
// ErrInvalidEndpoint.
func (c *Cache) Reconfigure(tiers []Tier) error {
	targets, err := validate(tiers)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	next := make(map[string]*tierState, len(tiers))
	kept := map[*member]bool{}
	for i, t := range tiers {
		old := c.tiers[t.Key]
		ts := &tierState{members: make([]*member, 0, len(t.Members))}
		for j, m := range t.Members {
			target := targets[i][j]
			if prev := old.find(m.ID); prev != nil && prev.target == target {
				kept[prev] = true
				ts.members = append(ts.members, prev)
				continue
			}
			nm := newMember(m.ID, target)
			if c.runCtx != nil {
				c.startLocked(nm)
			}
			ts.members = append(ts.members, nm)
		}
		next[t.Key] = ts
	}
	for _, ts := range c.tiers {
		for _, m := range ts.members {
			if !kept[m] {
				m.stop()
			}
		}
	}
	c.tiers = next
	return nil
}

// validate checks the configuration and derives each member's Target.
func validate(tiers []Tier) ([][]Target, error) {
	total := 0
	keys := make(map[string]bool, len(tiers))
	targets := make([][]Target, len(tiers))
	for i, t := range tiers {
		switch {
		case t.Key == "":
			return nil, ErrInvalidTier
		case keys[t.Key]:
			return nil, fmt.Errorf("%w: tier %q", ErrDuplicateTier, t.Key)
		case t.ServedModel == "":
			return nil, fmt.Errorf("%w: tier %q", ErrInvalidServedModel, t.Key)
		case len(t.Members) < 1 || len(t.Members) > MaxTierMembers:
			return nil, fmt.Errorf("%w: tier %q", ErrTierSize, t.Key)
		}
		keys[t.Key] = true
		total += len(t.Members)
		if total > MaxMembers {
			return nil, ErrTooManyMembers
		}
		ids := make(map[string]bool, len(t.Members))
		for _, m := range t.Members {
			if !validMemberID(m.ID) {
				return nil, fmt.Errorf("%w: tier %q", ErrInvalidMember, t.Key)
			}
			if ids[m.ID] {
				return nil, fmt.Errorf("%w: tier %q member %q", ErrDuplicateMember, t.Key, m.ID)
			}
			ids[m.ID] = true
			u, err := ModelsURL(m.Endpoint)
			if err != nil {
				return nil, fmt.Errorf("%w: tier %q member %q", err, t.Key, m.ID)
			}
			targets[i] = append(targets[i], Target{ModelsURL: u, ServedModel: t.ServedModel})
		}
	}
	return targets, nil
}

// validMemberID reports whether id matches ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$.
func validMemberID(id string) bool {
	if len(id) == 0 || len(id) > maxMemberIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9':
		case b == '-' && i > 0 && i < len(id)-1:
		default:
			return false
		}
	}
	return true
}

func newMember(id string, target Target) *member {
	return &member{
		id:      id,
		target:  target,
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		gone:    make(chan struct{}),
	}
}

// find returns the member with id, or nil. It accepts a nil tier.
func (t *tierState) find(id string) *member {
	if t == nil {
		return nil
	}
	for _, m := range t.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// stop unregisters the member: its prober stops and ProbeNow waiters return.
// Cache.mu must be held.
func (m *member) stop() {
	if m.cancel != nil {
		m.cancel()
	}
	close(m.gone)
}

// Run starts one prober per registered member (and per member registered
// later) and blocks until ctx is done or Close is called, then waits for
// every prober to return. It returns nil after a normal stop, ErrClosed if
// the Cache was already closed and ErrAlreadyRunning on a second call.
func (c *Cache) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.started:
		c.mu.Unlock()
		return ErrAlreadyRunning
	}
	c.started = true
	runCtx, stop := context.WithCancel(ctx)
	c.runCtx, c.stopRun, c.runDone = runCtx, stop, make(chan struct{})
	for _, ts := range c.tiers {
		for _, m := range ts.members {
			c.startLocked(m)
		}
	}
	c.mu.Unlock()

	<-runCtx.Done()
	c.mu.Lock()
	c.runCtx = nil // no prober starts after this point
	close(c.runDone)
	c.mu.Unlock()
	stop()
	c.wg.Wait()
	return nil
}

// startLocked starts the member's prober. Cache.mu must be held and runCtx
// set.
func (c *Cache) startLocked(m *member) {
	ctx, cancel := context.WithCancel(c.runCtx)
	m.cancel = cancel
	c.wg.Add(1)
	go c.loop(ctx, m)
}

// loop is one member's prober: probe now, then on every tick or ProbeNow
// request, until ctx ends. The ticker exists before the first probe so that
// a tick during a probe is never lost.
func (c *Cache) loop(ctx context.Context, m *member) {
	defer c.wg.Done()
	ticker := c.clock.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		c.probe(ctx, m)
		if c.probed != nil {
			c.probed(m.id)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-m.wake:
		}
	}
}

// probe runs one probe outside the lock and publishes its result unless the
// member was stopped meanwhile.
func (c *Cache) probe(ctx context.Context, m *member) {
	if ctx.Err() != nil {
		// A tick and the stop can arrive together; stopping wins.
		return
	}
	c.mu.Lock()
	m.started++
	seq := m.started
	start := c.clock.Now()
	c.mu.Unlock()

	err := c.prober.Probe(ctx, m.target)

	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	end := c.clock.Now()
	elapsed := end.Sub(start)
	m.ready = err == nil && elapsed >= 0 && elapsed <= ProbeTimeout && seq > m.rechecked
	m.at = end
	m.finished = seq
	close(m.changed)
	m.changed = make(chan struct{})
}

// Ready returns, for every registered member of tier, whether it is ready
// now: its latest probe succeeded, took at most ProbeTimeout and completed at
// most StaleIntervals intervals ago. The map is new and owned by the caller.
// Ready never probes or waits; after Close every member reads not ready.
//
// Errors: ErrUnknownTier.
func (c *Cache) Ready(tier string) (map[string]bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.tiers[tier]
	if !ok {
		return nil, ErrUnknownTier
	}
	now := c.clock.Now()
	limit := StaleIntervals * c.interval
	out := make(map[string]bool, len(ts.members))
	for _, m := range ts.members {
		age := now.Sub(m.at)
		out[m.id] = !c.closed && m.ready && !m.at.IsZero() && age >= 0 && age <= limit
	}
	return out, nil
}

// ProbeNow asks the member's prober for an immediate probe, as Recheck
// does, and waits for a probe that started after the call to complete. It
// returns that probe's result; the result is also published for Ready. If
// ctx ends first the probe still completes and is published, and ctx's error
// is returned.
//
// Errors: ErrClosed, ErrUnknownTier, ErrUnknownMember (also when the member
// is removed while waiting), ErrNotRunning (also when Run stops while
// waiting) and ctx.Err().
func (c *Cache) ProbeNow(ctx context.Context, tier, member string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, ErrClosed
	}
	ts, ok := c.tiers[tier]
	if !ok {
		return false, ErrUnknownTier
	}
	m := ts.find(member)
	switch {
	case m == nil:
		return false, ErrUnknownMember
	case c.runCtx == nil || m.cancel == nil:
		return false, ErrNotRunning
	}
	want := m.started + 1
	select {
	case m.wake <- struct{}{}:
	default: // a request is already pending; it will start after this call
	}
	if c.probeNowWaits != nil {
		c.probeNowWaits(m.id)
	}
	for m.finished < want {
		changed, gone, runDone := m.changed, m.gone, c.runDone
		c.mu.Unlock()
		select {
		case <-changed:
		case <-gone:
			c.mu.Lock()
			if c.closed {
				return false, ErrClosed
			}
			return false, ErrUnknownMember
		case <-runDone:
			c.mu.Lock()
			if c.closed {
				return false, ErrClosed
			}
			return false, ErrNotRunning
		case <-ctx.Done():
			c.mu.Lock()
			return false, ctx.Err()
		}
		c.mu.Lock()
	}
	return m.ready, nil
}

// Recheck marks the member not ready at once and asks its prober for an
// immediate probe: the member is ready again only when a probe that started
// after the call passes. A probe already in flight may still complete, but
// even a passing one leaves the member not ready. The router calls it when a
// connection to the member failed (passive ejection) and when the member is
// readmitted (docs/ROUTER.md#5-configuration-changes); it implements
// router.Rechecker.
//
// Recheck never blocks. It does nothing for an unknown tier or member or a
// closed Cache. Before Run (or after it returned) the member stays not ready
// until the first probe of the next Run passes.
func (c *Cache) Recheck(tier, member string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	m := c.tiers[tier].find(member)
	if m == nil {
		return
	}
	m.ready = false
	m.rechecked = m.started
	select {
	case m.wake <- struct{}{}:
	default: // a request is already pending; it starts after this call
	}
}

// Close stops the Cache. It is idempotent and never blocks: probers are
// cancelled (Run returns once they have), ProbeNow waiters return ErrClosed,
// and every member reads not ready from then on.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.stopRun != nil {
		c.stopRun()
	}
	for _, ts := range c.tiers {
		for _, m := range ts.members {
			m.stop()
		}
	}
}
