package pressure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

const (
	// MaxMembers bounds the members registered in one Cache, across all its
	// tiers. It is the router-wide member bound
	// (docs/CONFIGURATION.md#1-router-flags: sixteen full tiers of sixteen) and bounds the queue, since each member has at most one
	// pending refresh.
	MaxMembers = bounds.MaxNodeMembers

	// MinTierMembers is the smallest Capacity tier: a tier of one member is
	// direct and never ranked, so it has no use for pressure.
	MinTierMembers = scheduler.MinMembers

	// MaxTierMembers is the largest Capacity tier, the bound Rank accepts.
	MaxTierMembers = bounds.MaxMembers

	// MaxWorkers bounds the goroutines that collect samples for the whole
	// Cache (docs/PRESSURE.md#the-cache). Two let one stalled endpoint hold a worker without
	// stopping every other member's refresh, while collection never occupies
	// more than two goroutines on a router that shares a small host with its
	// engines. The price is paid under mass failure: if all 256 members stall
	// for the full FetchTimeout, one round takes about 128 s, and their
	// samples read failed meanwhile.
	MaxWorkers = 2

	// RefreshInterval is how long after a sample's collection completed the
	// next Snapshot schedules a new one. One second keeps a sample well
	// inside scheduler.MaxSampleAge while costing each engine one scrape per
	// second at most.
	RefreshInterval = time.Second
)

// Options configures a Cache. The zero value is usable.
type Options struct {
	// Clock is read for observation times, fetch deadlines and sample ages.
	// Its zero value (nil) is the real clock.
	Clock clock.PassiveClock
	// Collector samples one member. Its zero value (nil) is an HTTPCollector
	// with its zero value.
	Collector Collector
}

// Tier registers one Capacity tier with a Cache.
type Tier struct {
	// Key identifies the tier (for example namespace/name). It must be
	// non-empty and unique within the Cache.
	Key string
	// Members are the tier's members, MinTierMembers..MaxTierMembers of them
	// with unique ids.
	Members []Member
}

// Member registers one member of a Capacity tier.
type Member struct {
	// ID is the member id; it must match the ReplicaTier member id grammar.
	ID string
	// MetricsURL is the absolute http(s) URL of the member's metrics
	// endpoint (see MetricsURL). It is ignored when Engine is empty.
	MetricsURL string
	// Engine names the member's metrics dialect (see ParseEngine). Empty
	// means the member declares no metrics: it is never sampled and always
	// reads unknown.
	Engine string
	// Capacity is the member's concurrency ceiling, passed to
	// scheduler.Normalize as the denominator of request pressure.
	Capacity int
}

// Cache keeps the latest normalized pressure of every registered member and
// refreshes it in the background. Snapshot and Peek never wait for
// collection; collection runs on at most MaxWorkers goroutines, started
// lazily by the first Snapshot that schedules work and stopped by Close.
//
// A Cache must be created with New. All methods are safe for concurrent use.
type Cache struct {
	clock     clock.PassiveClock
	collector Collector

	// ctx is cancelled by Close; every fetch context derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	cond   *sync.Cond // signalled when queue grows or the cache closes
	tiers  map[string]*tierState
	queue  []*memberState // FIFO of pending refreshes, at most one per member
	closed bool

	workers int // worker goroutines alive
	busy    int // workers inside Collect

	// published, when set (tests only), is called by a worker after each
	// completed refresh has been published or discarded, outside the lock.
	published func(memberID string)
}

// tierState is one registered tier: its members in registration order.
type tierState struct {
	members []*memberState
}

// memberState is one registered member. The configuration fields are fixed
// at registration; a changed configuration replaces the whole state. The
// remaining fields are guarded by Cache.mu.
type memberState struct {
	id       string
	target   Target
	capacity int

	// The only retained result: a normalized pressure and when it was
	// observed. No telemetry, raw text or error is kept.
	sampled    bool // false: no completed collection (or no metrics declared)
	sample     scheduler.Pressure
	observedAt time.Time

	completedAt time.Time          // last completion; refresh is due RefreshInterval later
	pending     bool               // single-flight mark: queued or running
	running     bool               // a worker is inside Collect for this member
	startedAt   time.Time          // when the running fetch started
	cancel      context.CancelFunc // cancels the running fetch
	removed     bool               // unregistered or replaced by Reconfigure
}

// New returns an empty Cache. It starts no goroutine; register tiers with
// Reconfigure.
func New(opts Options) *Cache {
	c := &Cache{
		clock:     opts.Clock,
		collector: opts.Collector,
		tiers:     map[string]*tierState{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.collector == nil {
		c.collector = HTTPCollector{}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Reconfigure replaces the registered tiers atomically. The whole
// configuration is validated first; on error nothing changes. A member whose
// tier key, id, metrics URL, engine and capacity are unchanged keeps its
// sample and any pending refresh. Any other member starts without a sample:
// a removed or changed member's queued refresh is dropped and its running
// fetch is cancelled and its result discarded.
//
// Errors: ErrClosed, ErrTooManyMembers, ErrInvalidTier, ErrDuplicateTier,
// ErrTierSize, ErrInvalidMember, ErrDuplicateMember, ErrInvalidCapacity,
// ErrUnknownEngine and ErrInvalidMetricsURL, wrapped with the offending tier
// and member.
func (c *Cache) Reconfigure(tiers []Tier) error {
	if err := validate(tiers); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	next := make(map[string]*tierState, len(tiers))
	kept := map[*memberState]bool{}
	for _, t := range tiers {
		old := c.tiers[t.Key]
		ts := &tierState{members: make([]*memberState, 0, len(t.Members))}
		for _, m := range t.Members {
			st := newMemberState(m)
			if prev := old.find(m.ID); prev != nil && prev.sameConfig(st) {
				st = prev
				kept[st] = true
			}
			ts.members = append(ts.members, st)
		}
		next[t.Key] = ts
	}
	for _, ts := range c.tiers {
		for _, st := range ts.members {
			if !kept[st] {
				st.removed = true
				if st.cancel != nil {
					st.cancel()
				}
			}
		}
	}
	c.tiers = next
	q := c.queue[:0]
	for _, st := range c.queue {
		if !st.removed {
			q = append(q, st)
		}
	}
	clear(c.queue[len(q):])
	c.queue = q
	return nil
}

// validate checks a whole configuration against the registration bounds
// of docs/PRESSURE.md#the-cache.
func validate(tiers []Tier) error {
	total := 0
	keys := make(map[string]bool, len(tiers))
	for _, t := range tiers {
		if t.Key == "" {
			return ErrInvalidTier
		}
		if keys[t.Key] {
			return wrapf(ErrDuplicateTier, t.Key, "")
		}
		keys[t.Key] = true
		if len(t.Members) < MinTierMembers || len(t.Members) > MaxTierMembers {
			return wrapf(ErrTierSize, t.Key, "")
		}
		total += len(t.Members)
		if total > MaxMembers {
			return ErrTooManyMembers
		}
		ids := make(map[string]bool, len(t.Members))
		for _, m := range t.Members {
			if err := validateMember(m); err != nil {
				return wrapf(err, t.Key, m.ID)
			}
			if ids[m.ID] {
				return wrapf(ErrDuplicateMember, t.Key, m.ID)
			}
			ids[m.ID] = true
		}
	}
	return nil
}

func validateMember(m Member) error {
	switch {
	case !bounds.ValidMemberID(m.ID):
		return ErrInvalidMember
	case m.Capacity < bounds.MinConcurrency || m.Capacity > bounds.MaxConcurrency:
		return ErrInvalidCapacity
	case m.Engine == "":
		return nil
	case !ValidEngine(m.Engine):
		return ErrUnknownEngine
	case !validMetricsURL(m.MetricsURL):
		return ErrInvalidMetricsURL
	}
	return nil
}

// wrapf adds the tier key and, when valid, the member id to a sentinel. Ids
// that fail the grammar are not echoed.
func wrapf(err error, tier, member string) error {
	if member != "" && bounds.ValidMemberID(member) {
		return fmt.Errorf("%w: tier %q member %q", err, tier, member)
	}
	return fmt.Errorf("%w: tier %q", err, tier)
}

func newMemberState(m Member) *memberState {
	st := &memberState{id: m.ID, capacity: m.Capacity}
	if m.Engine != "" {
		st.target = Target{MetricsURL: m.MetricsURL, Engine: Engine(m.Engine)}
	}
	return st
}

// find returns the member with id, or nil. It accepts a nil tier.
func (t *tierState) find(id string) *memberState {
	if t == nil {
		return nil
	}
	for _, st := range t.members {
		if st.id == id {
			return st
		}
	}
	return nil
}

func (st *memberState) sameConfig(o *memberState) bool {
	return st.id == o.id && st.target == o.target && st.capacity == o.capacity
}

// sampling reports whether the member declares metrics.
func (st *memberState) sampling() bool { return st.target.Engine != "" }

// Snapshot returns the current pressure of every registered member of tier,
// as a new map the caller owns, and queues a refresh for every member whose
// sample is due (never sampled, or RefreshInterval after its last completion)
// and not already pending. It never waits for collection. After Close every
// member reads unknown and nothing is scheduled.
//
// Errors: ErrUnknownTier.
func (c *Cache) Snapshot(tier string) (map[string]scheduler.Pressure, error) {
	return c.read(tier, true)
}

// Peek returns the same view as Snapshot without scheduling any refresh or
// starting any worker. It is for observability, which must not cause I/O.
//
// Errors: ErrUnknownTier.
func (c *Cache) Peek(tier string) (map[string]scheduler.Pressure, error) {
	return c.read(tier, false)
}

// read is the shared read path of Snapshot and Peek. The clock is read under
// the lock so that a sample published just before can never look as if it
// came from the future.
func (c *Cache) read(tier string, schedule bool) (map[string]scheduler.Pressure, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.tiers[tier]
	if !ok {
		return nil, ErrUnknownTier
	}
	out := make(map[string]scheduler.Pressure, len(ts.members))
	if c.closed {
		for _, st := range ts.members {
			out[st.id] = scheduler.UnknownPressure()
		}
		return out, nil
	}
	now := c.clock.Now()
	queued := false
	for _, st := range ts.members {
		out[st.id] = st.view(now)
		if schedule && st.due(now) {
			st.pending = true
			c.queue = append(c.queue, st)
			queued = true
		}
	}
	if queued {
		c.startWorkers()
		c.cond.Broadcast()
	}
	return out, nil
}

// view projects the member's retained sample to now.
func (st *memberState) view(now time.Time) scheduler.Pressure {
	switch {
	case st.running && now.Sub(st.startedAt) > FetchTimeout:
		// Overdue: whatever the fetch returns will be discarded as failed.
		return failedPressure(st.startedAt, now, st.capacity)
	case !st.sampled:
		return scheduler.UnknownPressure()
	case st.sample.Freshness != scheduler.FreshnessFresh:
		return st.sample
	}
	p := st.sample
	switch age := now.Sub(st.observedAt); {
	case age < 0:
		p.Freshness, p.PPM = scheduler.FreshnessUnknown, 0
	case age > scheduler.MaxSampleAge:
		p.Freshness, p.PPM = scheduler.FreshnessStale, 0
	}
	return p
}

// due reports whether a refresh should be queued for the member.
func (st *memberState) due(now time.Time) bool {
	if st.pending || !st.sampling() {
		return false
	}
	if st.completedAt.IsZero() {
		return true
	}
	age := now.Sub(st.completedAt)
	return age >= RefreshInterval || age < 0
}

// startWorkers starts workers until every queued refresh has an idle worker
// or MaxWorkers are alive. c.mu must be held.
func (c *Cache) startWorkers() {
	for c.workers < MaxWorkers && c.workers-c.busy < len(c.queue) {
		c.workers++
		go c.work()
	}
}

// work is one worker: it takes the oldest queued refresh, collects it
// outside the lock and publishes the normalized result, until Close.
func (c *Cache) work() {
	for {
		st, ctx, started, ok := c.next()
		if !ok {
			return
		}
		t, err := c.collector.Collect(ctx, st.target)
		end := c.clock.Now()
		c.publish(st, classify(started, end, st.capacity, t, err), end)
		if c.published != nil {
			c.published(st.id)
		}
	}
}

// next blocks until a refresh is queued or the cache closes, and marks the
// dequeued member running.
func (c *Cache) next() (*memberState, context.Context, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) == 0 && !c.closed {
		c.cond.Wait()
	}
	if c.closed {
		c.workers--
		return nil, nil, time.Time{}, false
	}
	st := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	ctx, cancel := context.WithCancel(c.ctx)
	st.running, st.startedAt, st.cancel = true, c.clock.Now(), cancel
	c.busy++
	return st, ctx, st.startedAt, true
}

// publish stores a completed refresh unless the cache closed or the member
// was removed meanwhile, in which case the result is discarded.
func (c *Cache) publish(st *memberState, p scheduler.Pressure, end time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy--
	st.cancel()
	st.running, st.pending, st.cancel = false, false, nil
	if c.closed || st.removed {
		return
	}
	st.sample, st.observedAt, st.sampled = p, end, true
	st.completedAt = end
}

// classify turns one collection into the pressure to retain. The telemetry
// and error are dropped here.
func classify(started, end time.Time, capacity int, t scheduler.Telemetry, err error) scheduler.Pressure {
	switch {
	case end.Sub(started) > FetchTimeout:
		return failedPressure(end, end, capacity)
	case err == nil:
		return scheduler.Normalize(end, end, true, capacity, t)
	case errors.Is(err, ErrParse), errors.Is(err, ErrBodyTooLarge),
		errors.Is(err, ErrMissingSeries), errors.Is(err, ErrUnknownEngine):
		return scheduler.UnknownPressure()
	default:
		return failedPressure(end, end, capacity)
	}
}

// failedPressure is the pressure of a collection that did not succeed.
func failedPressure(observedAt, now time.Time, capacity int) scheduler.Pressure {
	return scheduler.Normalize(observedAt, now, false, capacity, scheduler.Telemetry{})
}

// Close stops the Cache. It is idempotent and never blocks: queued refreshes
// are dropped, idle workers are woken to exit, running fetches are cancelled
// and their results discarded. Afterwards every member reads unknown and
// Reconfigure returns ErrClosed. Workers exit once their collector returns.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, st := range c.queue {
		st.pending = false
	}
	clear(c.queue)
	c.queue = nil
	c.cancel()
	c.cond.Broadcast()
}
