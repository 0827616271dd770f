package pressure

import (
	"cmp"
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/memberpoll"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

const (
	// MinTierMembers is the smallest Capacity tier: a tier of one member is
	// direct and never ranked, so it has no use for pressure.
	MinTierMembers = scheduler.MinMembers

	// MaxWorkers bounds the goroutines that collect samples for the whole
	// Cache (docs/PRESSURE.md#the-cache). Two let one stalled endpoint hold a
	// worker without stopping every other member's refresh, while collection
	// never occupies more than two goroutines on a router that shares a
	// small host with its engines. The price is paid under mass failure: if
	// all 256 members stall for the full FetchTimeout, one round takes about
	// 128 s, and their samples read failed meanwhile.
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
	// Sampled, when set, is called with the member's id after each
	// refresh's sample was published for Snapshot (or discarded), on the
	// collecting goroutine and outside the Cache's locks; it must return at
	// once. A caller that steps the Cache's clock or answers its Collector
	// waits on it to know a refresh is done. Nil means no call.
	Sampled func(memberID string)
}

// Tier registers one Capacity tier with a Cache: its key and
// MinTierMembers..bounds.MaxMembers members with unique ids.
type Tier = memberpoll.Tier[Member]

// Member registers one member of a Capacity tier.
type Member struct {
	// ID is the member id; it must match the ReplicaTier member id grammar.
	ID string
	// MetricsURL is the absolute http(s) URL of the member's metrics
	// endpoint (see MetricsURL). It is ignored when Engine and Series are
	// empty.
	MetricsURL string
	// Engine names the member's metrics dialect (see ParseEngine). Empty,
	// with an empty Series, means the member declares no metrics: it is
	// never sampled and always reads unknown.
	Engine string
	// Series names the member's own pressure series, each replacing the
	// engine's for its signal (see Series).
	Series Series
	// Capacity is the member's concurrency ceiling, passed to
	// scheduler.Normalize as the denominator of request pressure.
	Capacity int
}

// MemberID implements memberpoll.Member.
func (m Member) MemberID() string { return m.ID }

// metered reports whether the member declares metrics to sample.
func (m Member) metered() bool { return m.Engine != "" || !m.Series.IsZero() }

// Cache keeps the latest normalized pressure of every registered member and
// refreshes it in the background. Snapshot and Peek never wait for
// collection; collection runs on at most MaxWorkers goroutines, started
// lazily by the first Snapshot that schedules work and stopped by Close.
// The Cache defines the collection and the freshness projection;
// memberpoll runs it.
//
// A Cache must be created with New. All methods are safe for concurrent use.
type Cache struct {
	clock     clock.PassiveClock
	collector Collector
	polls     *memberpoll.Runtime[Member, scheduler.Pressure, scheduler.Pressure]
}

// New returns an empty Cache. It starts no goroutine; register tiers with
// Reconfigure.
func New(opts Options) *Cache {
	c := &Cache{
		clock:     cmp.Or[clock.PassiveClock](opts.Clock, clock.RealClock{}),
		collector: cmp.Or[Collector](opts.Collector, HTTPCollector{}),
	}
	c.polls = memberpoll.New(memberpoll.Options[Member, scheduler.Pressure, scheduler.Pressure]{
		Clock:          c.clock,
		Collect:        c.collect,
		Project:        project,
		Validate:       validateMember,
		Polled:         func(m Member) bool { return m.metered() },
		Workers:        MaxWorkers,
		MinTierMembers: MinTierMembers,
		Interval:       RefreshInterval,
		Collected:      opts.Sampled,
	})
	_ = c.polls.Start() // cannot fail: the runtime is new; it starts no goroutine.
	return c
}

// Reconfigure replaces the registered tiers atomically. The whole
// configuration is validated first; on error nothing changes. A member whose
// tier key, id, metrics URL, engine, series and capacity are unchanged keeps its
// sample and any pending refresh. Any other member starts without a sample:
// a removed or changed member's queued refresh is dropped and its running
// fetch is cancelled and its result discarded.
//
// Errors: ErrInvalidCapacity, ErrUnknownEngine, ErrInvalidSeries,
// ErrInvalidMetricsURL and
// memberpoll's ErrClosed and registration errors (ErrInvalidTier,
// ErrDuplicateTier, ErrTierSize, ErrTooManyMembers, ErrInvalidMember,
// ErrDuplicateMember), wrapped with the offending tier and member.
func (c *Cache) Reconfigure(tiers []Tier) error {
	return c.polls.Reconfigure(tiers)
}

// validateMember checks the member-specific registration bounds of
// docs/PRESSURE.md#the-cache.
func validateMember(m Member) error {
	if m.Capacity < bounds.MinConcurrency || m.Capacity > bounds.MaxConcurrency {
		return ErrInvalidCapacity
	}
	if !m.metered() {
		return nil
	}
	if _, err := dialectOf(Engine(m.Engine), m.Series); err != nil {
		return err
	}
	if !validMetricsURL(m.MetricsURL) {
		return ErrInvalidMetricsURL
	}
	return nil
}

// Snapshot returns the current pressure of every registered member of tier,
// as a new map the caller owns, and queues a refresh for every member whose
// sample is due (never sampled, or RefreshInterval after its last completion)
// and not already pending. It never waits for collection. After Close every
// member reads unknown and nothing is scheduled.
//
// Errors: memberpoll.ErrUnknownTier.
func (c *Cache) Snapshot(tier string) (map[string]scheduler.Pressure, error) {
	return c.polls.Read(tier, true)
}

// Peek returns the same view as Snapshot without scheduling any refresh or
// starting any worker. It is for observability, which must not cause I/O.
//
// Errors: memberpoll.ErrUnknownTier.
func (c *Cache) Peek(tier string) (map[string]scheduler.Pressure, error) {
	return c.polls.Read(tier, false)
}

// collect samples one member and classifies the outcome into the pressure
// to retain. The telemetry and error are dropped here.
func (c *Cache) collect(ctx context.Context, m Member, started time.Time) scheduler.Pressure {
	t, err := c.collector.Collect(ctx, Target{MetricsURL: m.MetricsURL, Engine: Engine(m.Engine), Series: m.Series})
	end := c.clock.Now()
	switch o := Classify(err, end.Sub(started)); {
	case o == OutcomeSuccess:
		return scheduler.Normalize(end, end, true, m.Capacity, t)
	case o.unreadable():
		return scheduler.UnknownPressure()
	}
	return failedPressure(end, end, m.Capacity)
}

// project returns the member's retained sample as seen at now: a fetch
// running for more than FetchTimeout reads failed, a fresh sample older than
// scheduler.MaxSampleAge reads stale and one from the future unknown.
func project(s memberpoll.State[Member, scheduler.Pressure], now time.Time) scheduler.Pressure {
	switch {
	case s.Running && now.Sub(s.Started) > FetchTimeout:
		// Overdue: whatever the fetch returns will be discarded as failed.
		return failedPressure(s.Started, now, s.Member.Capacity)
	case s.Completed.IsZero():
		return scheduler.UnknownPressure()
	case s.Result.Freshness != scheduler.FreshnessFresh:
		return s.Result
	}
	p := s.Result
	switch age := now.Sub(s.Completed); {
	case age < 0:
		p.Freshness, p.PPM = scheduler.FreshnessUnknown, 0
	case age > scheduler.MaxSampleAge:
		p.Freshness, p.PPM = scheduler.FreshnessStale, 0
	}
	return p
}

// failedPressure is the pressure of a collection that did not succeed.
func failedPressure(observedAt, now time.Time, capacity int) scheduler.Pressure {
	return scheduler.Normalize(observedAt, now, false, capacity, scheduler.Telemetry{})
}

// Close stops the Cache. It is idempotent and never blocks: queued refreshes
// are dropped, idle workers are woken to exit, running fetches are cancelled
// and their results discarded. Afterwards every member reads unknown and
// Reconfigure returns memberpoll.ErrClosed. Workers exit once their
// collector returns.
func (c *Cache) Close() {
	c.polls.Close()
}
