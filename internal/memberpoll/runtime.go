package memberpoll

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Errors returned by a Runtime. Reconfigure wraps the registration errors
// with the offending tier key and, when valid, member id.
var (
	ErrInvalidTier     = errors.New("memberpoll: invalid tier key")               // empty key
	ErrDuplicateTier   = errors.New("memberpoll: duplicate tier key")             // two tiers, one key
	ErrTierSize        = errors.New("memberpoll: tier member count out of range") // outside MinTierMembers..bounds.MaxMembers
	ErrTooManyMembers  = errors.New("memberpoll: too many members")               // more than bounds.MaxNodeMembers in total (which also bounds the FIFO)
	ErrInvalidMember   = errors.New("memberpoll: invalid member id")              // outside the ReplicaTier grammar
	ErrDuplicateMember = errors.New("memberpoll: duplicate member id")            // two members of a tier, one id
	ErrUnknownTier     = errors.New("memberpoll: unknown tier")
	ErrUnknownMember   = errors.New("memberpoll: unknown member") // also: removed while a Request waited
	ErrClosed          = errors.New("memberpoll: closed")
	ErrStopped         = errors.New("memberpoll: not collecting") // before Start or after Stop
)

// Member is a client's registration of one member: everything its
// collection needs. A member whose registration is unchanged across
// Reconfigure keeps its state.
type Member interface {
	comparable
	// MemberID returns the member id, unique within its tier.
	MemberID() string
}

// Tier registers one tier: a non-empty key, unique within the Runtime, and
// Options.MinTierMembers..bounds.MaxMembers members.
type Tier[M Member] struct {
	Key     string
	Members []M
}

// State is what a projection sees of one member.
type State[M Member, R any] struct {
	Member    M         // the registration
	Result    R         // the latest published result; zero before the first
	Completed time.Time // when Result's collection completed; zero: no result
	Running   bool      // a collection is in flight...
	Started   time.Time // ...since Started
}

// Options configures a Runtime. Collect and Project are required.
type Options[M Member, R, V any] struct {
	// Clock is read for start, completion and read times; nil is the real
	// clock.
	Clock clock.PassiveClock
	// Collect collects one member, started at started, on a worker outside
	// the lock. ctx is cancelled when the member is removed or replaced and
	// on Stop and Close, and the result is then discarded.
	Collect func(ctx context.Context, m M, started time.Time) R
	// Project turns a member's state into what a read returns at now. It
	// runs under the lock and must not block.
	Project func(s State[M, R], now time.Time) V
	// Validate checks one registration for Reconfigure; nil accepts any.
	Validate func(m M) error
	// Polled reports whether a member is collected at all; nil: every one.
	Polled func(m M) bool
	// Workers bounds the worker goroutines (at least one).
	Workers int
	// MinTierMembers is the smallest tier Reconfigure accepts (at least one).
	MinTierMembers int
	// Interval is how long after a member's last collection completed a
	// scheduling Read finds it due again.
	Interval time.Duration
	// RequestNew makes Reconfigure request every member it adds or
	// replaces; otherwise a new member waits for a scheduling Read.
	RequestNew bool
	// Collected, when set, is called by the worker after each collection was
	// published or discarded, outside the lock.
	Collected func(member string)
}

// Runtime polls the members of registered tiers for one client. Create it
// with New, register tiers with Reconfigure and let it collect with Start.
// Its methods are safe for concurrent use, except Start with Stop.
type Runtime[M Member, R, V any] struct {
	opts Options[M, R, V]

	mu      sync.Mutex
	wake    *sync.Cond // idle workers wait on it
	tiers   map[string][]*member[M, R]
	queue   []*member[M, R] // FIFO of members to collect, each at most once
	ctx     context.Context // parent of every collection; nil while stopped
	cancel  context.CancelFunc
	closed  bool
	done    chan struct{} // closed by Close
	changed chan struct{} // closed and replaced whenever a Request wait may end
	workers int           // alive
	busy    int           // inside Collect
	wg      sync.WaitGroup
}

// member is one registered member. Member is fixed: a changed registration
// replaces the member. The other fields are guarded by Runtime.mu.
type member[M Member, R any] struct {
	State[M, R]
	queued   bool               // with Running, the single-flight mark
	again    bool               // requested while running: collect once more
	removed  bool               // unregistered or replaced
	cancel   context.CancelFunc // cancels the running collection
	seq      uint64             // collections started
	finished uint64             // number of the latest completed collection
	discard  uint64             // results of collections up to it are dropped
}

// New returns a stopped Runtime without tiers. It starts no goroutine.
func New[M Member, R, V any](opts Options[M, R, V]) *Runtime[M, R, V] {
	opts.Clock = cmp.Or[clock.PassiveClock](opts.Clock, clock.RealClock{})
	if opts.Validate == nil {
		opts.Validate = func(M) error { return nil }
	}
	if opts.Polled == nil {
		opts.Polled = func(M) bool { return true }
	}
	opts.Workers = max(opts.Workers, 1)
	opts.MinTierMembers = max(opts.MinTierMembers, 1)
	r := &Runtime[M, R, V]{opts: opts, tiers: map[string][]*member[M, R]{},
		done: make(chan struct{}), changed: make(chan struct{})}
	r.wake = sync.NewCond(&r.mu)
	return r
}

// Reconfigure replaces the registered tiers atomically, after validating
// all of them; on error nothing changes. A member whose tier key and
// registration are unchanged keeps its state, including a queued or running
// collection. Any other member starts without a result; a removed or
// replaced member leaves the queue, and its running collection is cancelled
// and discarded.
//
// Errors: ErrClosed, the registration errors and Options.Validate's.
func (r *Runtime[M, R, V]) Reconfigure(tiers []Tier[M]) error {
	if err := r.validate(tiers); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	next := make(map[string][]*member[M, R], len(tiers))
	kept := map[*member[M, R]]bool{}
	var added []*member[M, R]
	for _, t := range tiers {
		for _, reg := range t.Members {
			m, _ := r.lookup(t.Key, reg.MemberID())
			if m != nil && m.Member == reg {
				kept[m] = true
			} else {
				m = &member[M, R]{State: State[M, R]{Member: reg}}
				added = append(added, m)
			}
			next[t.Key] = append(next[t.Key], m)
		}
	}
	for _, ms := range r.tiers {
		for _, m := range ms {
			if !kept[m] {
				m.removed, m.queued = true, false
				if m.cancel != nil {
					m.cancel()
				}
			}
		}
	}
	r.tiers = next
	r.queue = slices.DeleteFunc(r.queue, func(m *member[M, R]) bool { return m.removed })
	for _, m := range added {
		if r.opts.RequestNew {
			r.request(m)
		}
	}
	r.notify()
	return nil
}

func (r *Runtime[M, R, V]) validate(tiers []Tier[M]) error {
	total := 0
	keys := make(map[string]bool, len(tiers))
	for _, t := range tiers {
		switch {
		case t.Key == "":
			return ErrInvalidTier
		case keys[t.Key]:
			return fmt.Errorf("%w: tier %q", ErrDuplicateTier, t.Key)
		case len(t.Members) < r.opts.MinTierMembers || len(t.Members) > bounds.MaxMembers:
			return fmt.Errorf("%w: tier %q", ErrTierSize, t.Key)
		}
		keys[t.Key] = true
		if total += len(t.Members); total > bounds.MaxNodeMembers {
			return ErrTooManyMembers
		}
		ids := make(map[string]bool, len(t.Members))
		for _, m := range t.Members {
			id := m.MemberID()
			if !bounds.ValidMemberID(id) { // not echoed: it may be anything
				return fmt.Errorf("%w: tier %q", ErrInvalidMember, t.Key)
			}
			err := r.opts.Validate(m)
			if ids[id] {
				err = ErrDuplicateMember
			}
			if err != nil {
				return fmt.Errorf("%w: tier %q member %q", err, t.Key, id)
			}
			ids[id] = true
		}
	}
	return nil
}

// Read returns the projection of every member of tier now, as a new map
// the caller owns, and never waits. With schedule it queues every member
// that is due: polled, neither queued nor running, and never collected or
// Options.Interval after its last collection completed (or with a completion
// in the future). After Close every member projects as never collected and
// nothing is queued. The clock is read under the lock, so that a result
// published just before never looks as if it came from the future.
//
// Errors: ErrUnknownTier.
func (r *Runtime[M, R, V]) Read(tier string, schedule bool) (map[string]V, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms, ok := r.tiers[tier]
	if !ok {
		return nil, ErrUnknownTier
	}
	now := r.opts.Clock.Now()
	out := make(map[string]V, len(ms))
	for _, m := range ms {
		s := State[M, R]{Member: m.Member}
		if !r.closed {
			s = m.State
			if schedule && r.due(m, now) {
				r.enqueue(m)
			}
		}
		out[m.Member.MemberID()] = r.opts.Project(s, now)
	}
	return out, nil
}

func (r *Runtime[M, R, V]) due(m *member[M, R], now time.Time) bool {
	if m.queued || m.Running || !r.opts.Polled(m.Member) {
		return false
	}
	age := now.Sub(m.Completed)
	return m.Completed.IsZero() || age >= r.opts.Interval || age < 0
}

// Lookup returns the state of one member as retained, after Close too.
//
// Errors: ErrUnknownTier and ErrUnknownMember.
func (r *Runtime[M, R, V]) Lookup(tier, id string) (State[M, R], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, err := r.lookup(tier, id)
	if err != nil {
		return State[M, R]{}, err
	}
	return m.State, nil
}

func (r *Runtime[M, R, V]) lookup(tier, id string) (*member[M, R], error) {
	ms, ok := r.tiers[tier]
	if !ok {
		return nil, ErrUnknownTier
	}
	for _, m := range ms {
		if m.Member.MemberID() == id {
			return m, nil
		}
	}
	return nil, ErrUnknownMember
}

// RequestAll asks for a collection of every polled member: a queued member
// stays queued once, a running one is collected once more after it
// completes. It never blocks and does nothing after Close.
func (r *Runtime[M, R, V]) RequestAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ms := range r.tiers {
		for _, m := range ms {
			r.request(m)
		}
	}
}

// Invalidate forgets the member's result, so that it projects as never
// collected, drops the results of collections already started, and asks
// for a collection as RequestAll does. It never blocks and does nothing for
// an unknown tier or member or after Close.
func (r *Runtime[M, R, V]) Invalidate(tier, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, err := r.lookup(tier, id); err == nil && !r.closed {
		var zero R
		m.Result, m.Completed, m.discard = zero, time.Time{}, m.seq
		r.request(m)
	}
}

// Request asks for a collection of the member as RequestAll does and
// returns a function waiting for a collection that started after the call:
// it returns that collection's result (zero if Invalidate dropped it), or
// ctx's error, ErrUnknownMember if the member is removed or replaced,
// ErrStopped on Stop and ErrClosed on Close. The collection outlives the
// wait and is published.
//
// Errors: ErrClosed, ErrUnknownTier, ErrUnknownMember and ErrStopped.
func (r *Runtime[M, R, V]) Request(tier, id string) (func(context.Context) (R, error), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	m, err := r.lookup(tier, id)
	if err == nil && r.ctx == nil {
		err = ErrStopped
	}
	if err != nil {
		return nil, err
	}
	want := m.seq + 1
	r.request(m)
	return func(ctx context.Context) (R, error) { return r.await(ctx, m, want) }, nil
}

func (r *Runtime[M, R, V]) await(ctx context.Context, m *member[M, R], want uint64) (R, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero R
	for {
		switch {
		case m.finished >= want:
			return m.Result, nil
		case r.closed:
			return zero, ErrClosed
		case m.removed:
			return zero, ErrUnknownMember
		case r.ctx == nil:
			return zero, ErrStopped
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
			r.mu.Lock()
		case <-ctx.Done():
			r.mu.Lock()
			return zero, ctx.Err()
		}
	}
}

// request queues m, or marks a running m to be collected again. r.mu must
// be held.
func (r *Runtime[M, R, V]) request(m *member[M, R]) {
	switch {
	case r.closed || !r.opts.Polled(m.Member):
	case m.Running:
		m.again = true
	case !m.queued:
		r.enqueue(m)
	}
}

// enqueue appends m to the FIFO and starts or wakes a worker. r.mu must be
// held.
func (r *Runtime[M, R, V]) enqueue(m *member[M, R]) {
	m.queued = true
	r.queue = append(r.queue, m)
	r.startWorkers()
	r.wake.Signal()
}

// startWorkers starts workers until every queued member has an idle one or
// Options.Workers are alive. r.mu must be held.
func (r *Runtime[M, R, V]) startWorkers() {
	for r.ctx != nil && r.workers < r.opts.Workers && r.workers-r.busy < len(r.queue) {
		r.workers++
		r.wg.Add(1)
		go r.work()
	}
}

// work collects the oldest queued member outside the lock and publishes the
// result, until Stop or Close.
func (r *Runtime[M, R, V]) work() {
	defer r.wg.Done()
	for {
		m, ctx, started, ok := r.next()
		if !ok {
			return
		}
		r.publish(m, ctx, r.opts.Collect(ctx, m.Member, started))
		if r.opts.Collected != nil {
			r.opts.Collected(m.Member.MemberID())
		}
	}
}

// next waits for a queued member, or returns false once stopped, and marks
// the member running.
func (r *Runtime[M, R, V]) next() (*member[M, R], context.Context, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.ctx != nil && len(r.queue) == 0 {
		r.wake.Wait()
	}
	if r.ctx == nil {
		r.workers--
		return nil, nil, time.Time{}, false
	}
	m := r.queue[0]
	r.queue[0], r.queue = nil, r.queue[1:]
	ctx, cancel := context.WithCancel(r.ctx) //nolint:gosec // kept in m.cancel, called by publish and Reconfigure.
	m.cancel = cancel
	m.seq++
	m.queued, m.Running, m.Started = false, true, r.opts.Clock.Now()
	r.busy++
	return m, ctx, m.Started, true
}

// publish stores a result unless its collection was cancelled (the member
// removed or replaced, Stop, Close) or invalidated, and queues the member
// again if it was requested meanwhile.
func (r *Runtime[M, R, V]) publish(m *member[M, R], ctx context.Context, res R) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() == nil { // m.seq is still this collection's number
		m.finished = m.seq
		if m.seq > m.discard {
			m.Result, m.Completed = res, r.opts.Clock.Now()
		}
	}
	m.cancel()
	m.Running, m.cancel = false, nil
	r.busy--
	if m.again && !m.removed {
		m.again = false
		r.request(m)
	}
	r.notify()
}

// notify ends the current select of every Request wait. r.mu must be held.
func (r *Runtime[M, R, V]) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Start lets workers collect queued members, started lazily up to
// Options.Workers, until Stop or Close.
//
// Errors: ErrClosed.
func (r *Runtime[M, R, V]) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.ctx == nil {
		ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // kept in r.cancel, called by Stop and Close.
		r.ctx, r.cancel = ctx, cancel
		r.startWorkers()
	}
	return nil
}

// Stop stops collecting until the next Start: running collections are
// cancelled and discarded, queued members stay queued, Request waits end
// and every worker exits. Stop waits for the workers to return.
func (r *Runtime[M, R, V]) Stop() {
	r.mu.Lock()
	r.stopLocked()
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Runtime[M, R, V]) stopLocked() {
	if r.ctx != nil {
		r.cancel()
		r.ctx, r.cancel = nil, nil
	}
	r.wake.Broadcast()
	r.notify()
}

// Close stops the Runtime for good. It is idempotent and never blocks: the
// queue is dropped, running collections are cancelled and discarded, idle
// workers exit and Request waits end. Workers exit once their Collect
// returns; Stop waits for them.
func (r *Runtime[M, R, V]) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.done)
		for _, m := range r.queue {
			m.queued = false
		}
		r.queue = nil
		r.stopLocked()
	}
}

// Done returns a channel closed by Close.
func (r *Runtime[M, R, V]) Done() <-chan struct{} { return r.done }

// Stats counts a Runtime's workers and members waiting for collection.
type Stats struct {
	Workers, Busy   int // goroutines alive; inside Collect
	Queued, Pending int // members queued; queued or running
}

// Stats returns the Runtime's counts now.
func (r *Runtime[M, R, V]) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Workers: r.workers, Busy: r.busy, Queued: len(r.queue)}
	for _, ms := range r.tiers {
		for _, m := range ms {
			if m.queued || m.Running {
				s.Pending++
			}
		}
	}
	return s
}
