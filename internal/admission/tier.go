package admission

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// maxAcquireAttempts bounds how often Acquire revalidates its inputs when a
// membership change lands between validation and the lock. Membership changes
// come from configuration, at human pace, so a second attempt nearly always
// succeeds; the bound only guarantees Acquire returns.
const maxAcquireAttempts = 4

// Tier is the admission owner of one tier. It holds the only lock, the only
// rotating cursor and the only reservation counts of the tier. Create one with
// New; the zero value is not usable. All methods are safe for concurrent use.
type Tier struct {
	// view is the membership Acquire validates its inputs against before it
	// takes mu. It is replaced, never modified, and only while holding mu.
	view atomic.Pointer[membership]
	// epoch is the readmission epoch (ReadmitEpoch): it starts at 1 and
	// advances, under mu, whenever a quiesced scope admits again.
	epoch atomic.Uint64

	mu      sync.Mutex
	members []*member     // current members, sorted by id, parallel to view.ids.
	retired []*member     // removed members still holding leases, sorted by id.
	ceiling int           // 0 = unbounded.
	active  int           // Σ active over members and retired.
	cursor  int           // 0..len(members)-1.
	reason  string        // tier quiesce reason; empty = admitting.
	wake    chan struct{} // closed to wake Drain waiters; nil when none wait.
	// handover is set while the tier's admission is handed over (HandOver):
	// Acquire refuses and reservation changes are queued on it.
	handover *Handover
	// queue holds the requests waiting for admission (Wait).
	queue waitQueue

	clock    clock.Clock   // times waits; immutable.
	inputs   func() Inputs // the inputs of a dispatch; immutable.
	onQueued func()        // WithQueued; nil calls nothing.
}

// Option configures a Tier at New.
type Option func(*Tier)

// WithClock times the queue's waits with c instead of the real clock.
func WithClock(c clock.Clock) Option { return func(t *Tier) { t.clock = c } }

// WithQueued has the tier call f, with its lock held, each time a request
// starts waiting in its queue; f must return at once and must not call the
// tier. Tests use it to act once a request really waits.
func WithQueued(f func()) Option { return func(t *Tier) { t.onQueued = f } }

// WithInputs has the tier read the inputs of a dispatch from f: when a
// release, a readmission or a reconfiguration may let a member admit a
// waiting request, the tier calls f, without its lock held, for the members'
// readiness and pressure at that instant. f must not wait and must not call
// the tier. Without it, a dispatch sees every member ready with unknown
// pressure.
func WithInputs(f func() Inputs) Option { return func(t *Tier) { t.inputs = f } }

// membership is the immutable part of a configuration that input validation
// depends on.
type membership struct {
	strategy bounds.Strategy // empty for a direct tier.
	ids      []string        // sorted by id.
}

// member is the admission state of one member. A Lease points at it, so a
// member removed by Reconfigure still receives its leases' releases.
type member struct {
	id      string // immutable.
	ceiling int    // 0 = unbounded.
	active  int
	reason  string // member quiesce reason; empty = admitting.
	retired bool   // removed from the configuration.
}

// New returns the admission owner for cfg with every member and the tier
// admitting and no reservations. It returns an error wrapping
// ErrInvalidConfig when cfg breaks a rule of Config.
func New(cfg Config, opts ...Option) (*Tier, error) {
	p, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	t := &Tier{members: make([]*member, len(p.members)), ceiling: p.ceiling, clock: clock.RealClock{}}
	for i, m := range p.members {
		t.members[i] = &member{id: m.ID, ceiling: m.MaxConcurrency}
	}
	t.view.Store(&membership{strategy: p.strategy, ids: p.ids})
	t.epoch.Store(1)
	t.queue.cfg = p.queue
	for _, o := range opts {
		o(t)
	}
	if t.inputs == nil {
		t.inputs = t.allReady
	}
	return t, nil
}

// allReady is the inputs of a dispatch without WithInputs: every member
// ready, pressure unknown.
func (t *Tier) allReady() Inputs {
	ids := t.view.Load().ids
	ready := make(map[string]bool, len(ids))
	for _, id := range ids {
		ready[id] = true
	}
	return Inputs{Ready: ready}
}

// ReadmitEpoch returns the tier's readmission epoch, which advances whenever
// a quiesced member or the tier is readmitted. A caller that reads readiness
// for Inputs reads the epoch first and passes it as Inputs.ReadmitEpoch: a
// readmission that lands after its readiness read then refuses the acquire
// instead of admitting to the readmitted member on readiness that predates
// the readmission (docs/ROUTER.md#5-configuration-changes). It never
// returns 0.
func (t *Tier) ReadmitEpoch() uint64 { return t.epoch.Load() }

// Inputs are the completed snapshots one Acquire decides on. Acquire reads
// them before taking the tier lock and keeps no reference to them.
type Inputs struct {
	// Ready has one entry for every member of the tier, true when the member
	// passed its readiness probe. A missing entry or an entry for a member
	// outside the tier refuses the acquire.
	Ready map[string]bool
	// Pressure is the members' upstream pressure, used only by the Capacity
	// strategy and ignored otherwise. A member without an entry has
	// scheduler.UnknownPressure; an entry for a member outside the tier or a
	// pressure failing Validate refuses the acquire.
	Pressure map[string]scheduler.Pressure
	// ReadmitEpoch is the tier's ReadmitEpoch read before Ready. When it is
	// not zero and a readmission landed since, Acquire refuses with an error
	// wrapping ErrInvalidInput and reserves nothing: Ready may predate the
	// readmission (a readmitted member must pass a probe first). Zero skips
	// the check.
	ReadmitEpoch uint64
}

// Acquire admits one request: it selects a member and reserves the member and
// the tier together, returning the Lease that holds the reservation.
//
// The inputs are validated and copied first; an error wrapping
// ErrInvalidInput leaves counts and cursor unchanged. Then, under the lock,
// Acquire refuses with ErrTierQuiesced when the tier is quiesced, ErrTierFull
// when the tier is at its ceiling or every ready, unquiesced member is at its
// own ceiling, and ErrNoEligibleMember when no member is ready and
// unquiesced. Otherwise the Capacity strategy selects with scheduler.Rank and
// RoundRobin and direct tiers take the first eligible member at or after the
// cursor; the cursor then moves to the member after the winner. Acquire never
// waits for capacity.
func (t *Tier) Acquire(in Inputs) (*Lease, error) {
	var ready [MaxMembers]bool
	var pressure [MaxMembers]scheduler.Pressure
	v, err := t.lockInputs(in, &ready, &pressure)
	if err != nil {
		return nil, err
	}
	var lease *Lease
	if t.queue.n > 0 {
		// Those waiting go first.
		t.dispatchLocked(v, &ready, &pressure)
	}
	if t.queue.n > 0 {
		err = ErrTierFull
	} else {
		lease, err = t.admitLocked(v, &ready, &pressure)
	}
	t.mu.Unlock()
	return lease, err
}

// lockInputs validates in against the membership and copies it into arrays
// indexed like its ids, then takes t.mu. It returns the membership with t.mu
// held, or an error wrapping ErrInvalidInput with t.mu not held when in is
// invalid, a readmission landed after in's ReadmitEpoch, or the membership
// kept changing.
func (t *Tier) lockInputs(in Inputs, ready *[MaxMembers]bool, pressure *[MaxMembers]scheduler.Pressure) (*membership, error) {
	for attempt := 1; ; attempt++ {
		v := t.view.Load()
		if err := v.copyInputs(in, ready, pressure); err != nil {
			return nil, err
		}
		t.mu.Lock()
		if in.ReadmitEpoch != 0 && in.ReadmitEpoch != t.epoch.Load() {
			t.mu.Unlock()
			return nil, fmt.Errorf("%w: a readmission landed after the readiness read", ErrInvalidInput)
		}
		if t.view.Load() == v {
			return v, nil
		}
		t.mu.Unlock()
		if attempt == maxAcquireAttempts {
			return nil, fmt.Errorf("%w: membership changed while validating", ErrInvalidInput)
		}
	}
}

// copyInputs validates in against the membership and copies it into arrays
// indexed like v.ids.
func (v *membership) copyInputs(in Inputs, ready *[MaxMembers]bool, pressure *[MaxMembers]scheduler.Pressure) error {
	for i, id := range v.ids {
		r, ok := in.Ready[id]
		if !ok {
			return fmt.Errorf("%w: no readiness for member %q", ErrInvalidInput, id)
		}
		ready[i] = r
	}
	if len(in.Ready) != len(v.ids) {
		return fmt.Errorf("%w: readiness names a member outside the tier", ErrInvalidInput)
	}
	if !v.strategy.UsesPressure() {
		return nil
	}
	found := 0
	for i, id := range v.ids {
		p, ok := in.Pressure[id]
		if !ok {
			pressure[i] = scheduler.UnknownPressure()
			continue
		}
		if p.Validate() != nil {
			return fmt.Errorf("%w: malformed pressure for member %q", ErrInvalidInput, id)
		}
		pressure[i] = p
		found++
	}
	if found != len(in.Pressure) {
		return fmt.Errorf("%w: pressure names a member outside the tier", ErrInvalidInput)
	}
	return nil
}

// admitLocked selects and reserves a member from copied inputs. t.mu is held
// and v is the current membership.
func (t *Tier) admitLocked(v *membership, ready *[MaxMembers]bool, pressure *[MaxMembers]scheduler.Pressure) (*Lease, error) {
	if t.reason != "" {
		return nil, ErrTierQuiesced
	}
	if t.handover != nil {
		return nil, errHandedOverRefusal
	}
	if t.ceiling > 0 && t.active >= t.ceiling {
		return nil, ErrTierFull
	}
	if v.strategy.UsesPressure() {
		return t.rankLocked(v, ready, pressure)
	}
	n := len(t.members)
	open := false
	for k := range n {
		i := (t.cursor + k) % n
		m := t.members[i]
		if !ready[i] || m.reason != "" {
			continue
		}
		open = true
		if m.ceiling > 0 && m.active >= m.ceiling {
			continue
		}
		l := &Lease{tier: t, member: m}
		t.reserveLocked(i)
		return l, nil
	}
	return nil, refusal(open)
}

// rankLocked selects with scheduler.Rank. t.mu is held.
func (t *Tier) rankLocked(v *membership, ready *[MaxMembers]bool, pressure *[MaxMembers]scheduler.Pressure) (*Lease, error) {
	var candidates [MaxMembers]scheduler.Candidate
	open := false
	for i, m := range t.members {
		c := &candidates[i]
		c.MemberID = m.id
		c.Eligible = ready[i] && m.reason == ""
		c.Active = m.active
		c.Capacity = m.ceiling
		c.Pressure = pressure[i]
		open = open || c.Eligible
	}
	d, err := scheduler.Rank(v.ids, t.cursor, candidates[:len(t.members)])
	if err != nil {
		// Unreachable: the configuration and the copied inputs were validated.
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if d.Reason != scheduler.ReasonSelected {
		return nil, refusal(open)
	}
	// The winner's rotating rank is its position in the membership less the
	// cursor, mod N.
	i := (d.Scores[0].RotatingRank + t.cursor) % len(t.members)
	l := &Lease{tier: t, member: t.members[i], decision: d, capacity: true}
	t.reserveLocked(i)
	return l, nil
}

// refusal is the error for an acquire that found no member with room: full
// when some member was ready and unquiesced, no eligible member otherwise.
func refusal(open bool) error {
	if open {
		return ErrTierFull
	}
	return ErrNoEligibleMember
}

// reserveLocked counts one reservation on member i and the tier and moves the
// cursor past the winner. t.mu is held.
func (t *Tier) reserveLocked(i int) {
	t.members[i].active++
	t.active++
	t.cursor = (i + 1) % len(t.members)
}

// releaseLocked returns one reservation of m. t.mu is held.
func (t *Tier) releaseLocked(m *member) {
	m.active--
	t.active--
	if m.retired && m.active == 0 {
		t.retired = slices.DeleteFunc(t.retired, func(r *member) bool { return r == m })
	}
	if t.handover != nil {
		t.handover.noteLocked(m.id, -1)
	}
	t.wakeLocked()
}

// wakeLocked wakes every Drain waiting on the tier so it re-evaluates its
// scope. t.mu is held.
func (t *Tier) wakeLocked() {
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// Lease is one admitted request's reservation of a member and of its tier. It
// is safe for concurrent use.
type Lease struct {
	tier     *Tier
	member   *member
	decision scheduler.Decision // meaningful when capacity is true.
	capacity bool
	released atomic.Bool
}

// Member returns the id of the reserved member.
func (l *Lease) Member() string { return l.member.id }

// Selection returns a copy of the scheduler decision that selected the member
// under the Capacity strategy, and nil for RoundRobin and direct tiers. The
// copy shares nothing with the lease, so the caller may keep or change it.
func (l *Lease) Selection() *scheduler.Decision {
	if !l.capacity {
		return nil
	}
	d := l.decision.Clone()
	return &d
}

// Release returns the reservation to the member and the tier, wakes any
// Drain waiting on them and admits the requests waiting in the tier's queue
// that a member can now admit. Only the first call has an effect, however
// many goroutines call it. A member removed by Reconfigure still receives
// the release.
func (l *Lease) Release() {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	t := l.tier
	t.mu.Lock()
	t.releaseLocked(l.member)
	waiting := t.queue.n > 0
	t.mu.Unlock()
	if waiting {
		t.dispatch()
	}
}
