package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// maxSpareLines bounds the emptied tenant lines a queue keeps for reuse: a
// few dozen tenants waiting at once is the common case, and a line is small.
const maxSpareLines = 64

// waitQueue holds the requests waiting for admission in a tier with a
// Queue (docs/ADMISSION-QUEUE.md). It is guarded by the tier's lock.
//
// Dispatch order: the highest priority band first; within a band the
// tenants take turns (round robin over the tenants with waiters, in the
// order they started waiting); within a tenant, first in, first out.
// Every waiter is on two lists: its tenant's line, in dispatch order, and
// the tier's arrival list, oldest first, which gives the oldest wait and the
// newest waiter (the first to leave when a reconfiguration lowers the
// bounds).
type waitQueue struct {
	cfg    Queue            // MaxRequests 0: the tier has no queue.
	n      int              // waiters.
	bands  []*band          // bands with waiters, highest priority first.
	lines  map[Tenant]*line // tenants with waiters.
	first  *waiter          // the arrival list's oldest waiter.
	last   *waiter          // the arrival list's newest waiter.
	spare  []*line          // emptied lines, reused so a steady queue allocates only waiters.
	bandOf map[int]*band    // bands with waiters, by priority.
}

// band is the tenants of one priority with requests waiting.
type band struct {
	priority int
	ring     []*line // tenants with waiters, in the order they started waiting.
	next     int     // the index in ring of the tenant whose turn it is.
}

// line is one tenant's waiters, first in, first out.
type line struct {
	tenant     Tenant
	band       *band
	head, tail *waiter
	n          int
}

// waiter is one waiting request. Its fields other than done are guarded by
// the tier's lock; done is closed, once, when the dispatcher settles the
// waiter (lease or err set), and the waiting goroutine reads lease and err
// after taking the lock.
type waiter struct {
	ctx      context.Context
	line     *line
	prev     *waiter // in the line.
	next     *waiter
	older    *waiter // in the arrival list.
	newer    *waiter
	enqueued time.Time
	timer    clock.Timer
	done     chan struct{}
	settled  bool
	lease    *Lease
	err      error
}

// errQueueRemoved is what a waiter gets when a reconfiguration removes the
// tier's queue: the refusal of a tier without one.
var errQueueRemoved = fmt.Errorf("%w: the queue was removed", ErrTierFull)

// errQueueHandedOverRefusal is what a waiter gets when the tier hands its
// admission over: the request is refused (wrapping ErrQueueHandedOver), not
// forwarded, since its wait started here.
var errQueueHandedOverRefusal = fmt.Errorf("%w: %w", ErrTierQuiesced, ErrQueueHandedOver)

// Waited says how a request's admission went: how long it waited in the
// queue (zero when it did not wait) and whether it waited at all.
type Waited struct {
	// Queued is true when the request waited in the queue.
	Queued bool
	// Duration is how long it waited, by the tier's clock.
	Duration time.Duration
}

// Wait admits one request like Acquire, and when the tier has a Queue and is
// too full to admit it (ErrTierFull), lets it wait for admission as who,
// holding no reservation, until one of:
//   - a member can admit it in its turn: it returns the Lease;
//   - it waited the Queue's MaxWait: ErrQueueTimeout;
//   - ctx ends: an error wrapping ErrClientGone and ctx's error, with no
//     lease held (a lease granted as ctx ended is released at once);
//   - the tier can no longer admit for another reason (quiesced, handed over,
//     no eligible member): that refusal, as an arrival would get it;
//   - a reconfiguration leaves it beyond the new bounds: ErrQueueFull, or
//     ErrTierFull when the queue was removed.
//
// It refuses at once with ErrQueueFull when the queue, or who's share of it,
// is full. A request does not wait while others wait ahead of it and a
// member could admit: the waiters are admitted first, in dispatch order, with
// in as the freshest inputs. Without a Queue, Wait is Acquire. who.Priority
// must be within MinPriority..MaxPriority, else ErrInvalidInput.
func (t *Tier) Wait(ctx context.Context, in Inputs, who Tenant) (*Lease, Waited, error) {
	if who.Priority < MinPriority || who.Priority > MaxPriority {
		return nil, Waited{}, fmt.Errorf("%w: priority %d outside %d..%d", ErrInvalidInput, who.Priority, MinPriority, MaxPriority)
	}
	var ready [MaxMembers]bool
	var pressure [MaxMembers]scheduler.Pressure
	v, err := t.lockInputs(in, &ready, &pressure)
	if err != nil {
		return nil, Waited{}, err
	}
	return t.arriveLocked(ctx, v, &ready, &pressure, who)
}

// arriveLocked admits an arriving request or makes it wait. t.mu is held on
// entry and released before it returns.
func (t *Tier) arriveLocked(ctx context.Context, v *membership, ready *[MaxMembers]bool, pressure *[MaxMembers]scheduler.Pressure, who Tenant) (*Lease, Waited, error) {
	q := &t.queue
	if q.n > 0 {
		// Those waiting go first; an arrival's inputs are the freshest.
		t.dispatchLocked(v, ready, pressure)
	}
	if q.n == 0 {
		lease, err := t.admitLocked(v, ready, pressure)
		if err == nil || q.cfg.MaxRequests == 0 || !errors.Is(err, ErrTierFull) {
			t.mu.Unlock()
			return lease, Waited{}, err
		}
	}
	// The tier is full: the dispatch above stopped at a waiter the tier could
	// not admit, or admitLocked refused this request.
	if !t.openLocked(ready) {
		t.mu.Unlock()
		return nil, Waited{}, ErrNoEligibleMember
	}
	l := q.lines[who]
	switch n := q.n; {
	case n >= q.cfg.MaxRequests:
		t.mu.Unlock()
		return nil, Waited{}, fmt.Errorf("%w: %d requests wait in the tier", ErrQueueFull, n)
	case l != nil && l.n >= q.cfg.MaxRequestsPerTenant:
		n = l.n
		t.mu.Unlock()
		return nil, Waited{}, fmt.Errorf("%w: the tenant's %d requests wait in the tier", ErrQueueFull, n)
	case ctx.Err() != nil:
		t.mu.Unlock()
		return nil, Waited{}, fmt.Errorf("%w: %w", ErrClientGone, ctx.Err())
	}
	w := &waiter{ctx: ctx, enqueued: t.clock.Now(), done: make(chan struct{})}
	timer := t.clock.NewTimer(q.cfg.MaxWait)
	w.timer = timer
	q.push(w, who)
	if t.onQueued != nil {
		t.onQueued()
	}
	t.mu.Unlock()

	var expired bool
	select {
	case <-w.done:
	case <-timer.C():
		expired = true
	case <-ctx.Done():
	}
	timer.Stop()
	t.mu.Lock()
	waited := Waited{Queued: true, Duration: t.clock.Since(w.enqueued)}
	if !w.settled {
		q.remove(w)
		w.settled = true
		w.err = fmt.Errorf("%w: %w", ErrClientGone, ctx.Err())
		if expired || ctx.Err() == nil {
			w.err = fmt.Errorf("%w: waited %v", ErrQueueTimeout, q.cfg.MaxWait)
		}
	}
	lease, err := w.lease, w.err
	t.mu.Unlock()
	if lease != nil && ctx.Err() != nil {
		// Admitted as its client left: nobody would read the response.
		lease.Release()
		return nil, waited, fmt.Errorf("%w: %w", ErrClientGone, ctx.Err())
	}
	return lease, waited, err
}

// dispatchLocked admits waiters in dispatch order while a member can admit
// them, each ranked by the tier's strategy on the given inputs and the counts
// as they are at that instant, and wakes each admitted waiter alone. A
// waiter whose client left is removed on the way. When the tier stops
// admitting for a reason other than capacity (quiesced, handed over, no
// eligible member), every waiter gets that refusal. t.mu is held and v is
// the current membership.
func (t *Tier) dispatchLocked(v *membership, ready *[MaxMembers]bool, pressure *[MaxMembers]scheduler.Pressure) {
	q := &t.queue
	for q.n > 0 {
		w := q.peek()
		if err := w.ctx.Err(); err != nil {
			q.remove(w)
			w.settle(nil, fmt.Errorf("%w: %w", ErrClientGone, err))
			continue
		}
		lease, err := t.admitLocked(v, ready, pressure)
		switch {
		case err == nil:
			q.admitted(w)
			w.settle(lease, nil)
		case errors.Is(err, ErrTierFull) && t.openLocked(ready):
			return
		case errors.Is(err, ErrTierFull):
			// Full, and no member would admit when a lease is released.
			t.refuseAllLocked(ErrNoEligibleMember)
			return
		default:
			t.refuseAllLocked(err)
			return
		}
	}
}

// openLocked reports whether some member is ready and unquiesced: a member
// that admits once it has room. t.mu is held.
func (t *Tier) openLocked(ready *[MaxMembers]bool) bool {
	for i, m := range t.members {
		if ready[i] && m.reason == "" {
			return true
		}
	}
	return false
}

// refuseAllLocked settles every waiter with err. t.mu is held.
func (t *Tier) refuseAllLocked(err error) {
	q := &t.queue
	for q.n > 0 {
		w := q.first
		q.remove(w)
		w.settle(nil, err)
	}
}

// dispatch admits waiters after an event that may let a member admit (a
// release, a readmission, a reconfiguration, a member turning ready), on
// fresh inputs from the tier's InputsFunc. It does nothing when nobody
// waits. A readmission landing between the inputs and the lock makes it try
// again with newer inputs, maxAcquireAttempts times at most; the event that
// changed them runs a dispatch of its own.
func (t *Tier) dispatch() {
	var ready [MaxMembers]bool
	var pressure [MaxMembers]scheduler.Pressure
	for range maxAcquireAttempts {
		in := t.inputs()
		v, err := t.lockInputs(in, &ready, &pressure)
		if err != nil {
			continue
		}
		t.dispatchLocked(v, &ready, &pressure)
		t.mu.Unlock()
		return
	}
}

// dispatchIfWaiting is dispatch when a request waits. t.mu is not held.
func (t *Tier) dispatchIfWaiting() {
	t.mu.Lock()
	waiting := t.queue.n > 0
	t.mu.Unlock()
	if waiting {
		t.dispatch()
	}
}

// Dispatch admits waiting requests as far as the tier can admit them now.
// Release, Readmit, SetIntent, Apply and Reconfigure dispatch by themselves;
// a caller calls Dispatch when an input changed that the tier cannot see: a
// member turning ready.
func (t *Tier) Dispatch() { t.dispatchIfWaiting() }

// reconfigureQueueLocked installs a new Queue (the zero Queue for none):
// waiters beyond its bounds leave, newest first, with ErrQueueFull, or all
// with the refusal of a tier without a queue when it was removed; the
// remaining waiters' deadlines follow the new MaxWait, counted from when
// each started waiting. t.mu is held.
func (t *Tier) reconfigureQueueLocked(cfg Queue) {
	q := &t.queue
	old := q.cfg
	q.cfg = cfg
	if cfg.MaxRequests == 0 {
		t.refuseAllLocked(errQueueRemoved)
		return
	}
	if cfg.MaxRequestsPerTenant < old.MaxRequestsPerTenant || old.MaxRequests == 0 {
		for _, l := range q.lines {
			for l.n > cfg.MaxRequestsPerTenant {
				w := l.tail
				q.remove(w)
				w.settle(nil, fmt.Errorf("%w: the tenant's share of the queue was lowered to %d", ErrQueueFull, cfg.MaxRequestsPerTenant))
			}
		}
	}
	for q.n > cfg.MaxRequests {
		w := q.last
		q.remove(w)
		w.settle(nil, fmt.Errorf("%w: the queue was lowered to %d", ErrQueueFull, cfg.MaxRequests))
	}
	if cfg.MaxWait == old.MaxWait {
		return
	}
	now := t.clock.Now()
	for w := q.first; w != nil; {
		next := w.newer
		left := cfg.MaxWait - now.Sub(w.enqueued)
		if left <= 0 {
			q.remove(w)
			w.settle(nil, fmt.Errorf("%w: waited %v", ErrQueueTimeout, cfg.MaxWait))
		} else {
			w.timer.Reset(left)
		}
		w = next
	}
}

// QueueStats is the state of a tier's queue.
type QueueStats struct {
	// MaxRequests is the queue's bound; zero when the tier has no queue.
	MaxRequests int
	// Waiting is the number of requests waiting.
	Waiting int
	// Oldest is when the longest-waiting request started waiting; zero
	// when none waits.
	Oldest time.Time
}

// QueueStats returns the state of the tier's queue.
func (t *Tier) QueueStats() QueueStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := QueueStats{MaxRequests: t.queue.cfg.MaxRequests, Waiting: t.queue.n}
	if t.queue.first != nil {
		s.Oldest = t.queue.first.enqueued
	}
	return s
}

// settle ends a waiter's wait with a lease or an error and wakes it. The
// tier's lock is held.
func (w *waiter) settle(lease *Lease, err error) {
	w.settled, w.lease, w.err = true, lease, err
	close(w.done)
}

// push appends w to who's line and to the arrival list.
func (q *waitQueue) push(w *waiter, who Tenant) {
	l := q.lines[who]
	if l == nil {
		l = q.newLine(who)
	}
	w.line = l
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next, w.prev = w, l.tail
	}
	l.tail = w
	l.n++
	if q.last == nil {
		q.first = w
	} else {
		q.last.newer, w.older = w, q.last
	}
	q.last = w
	q.n++
}

// newLine starts a line for who at the end of its band's turns, creating
// the band when it has no waiters.
func (q *waitQueue) newLine(who Tenant) *line {
	if q.lines == nil {
		q.lines = make(map[Tenant]*line)
		q.bandOf = make(map[int]*band)
	}
	b := q.bandOf[who.Priority]
	if b == nil {
		b = &band{priority: who.Priority}
		q.bandOf[who.Priority] = b
		i, _ := slices.BinarySearchFunc(q.bands, who.Priority, func(b *band, p int) int { return p - b.priority })
		q.bands = slices.Insert(q.bands, i, b)
	}
	var l *line
	if n := len(q.spare); n > 0 {
		l, q.spare = q.spare[n-1], q.spare[:n-1]
		*l = line{}
	} else {
		l = &line{}
	}
	l.tenant, l.band = who, b
	// A tenant that starts waiting takes its turn after every tenant already
	// waiting in the band: insert it just before the one whose turn is next.
	b.ring = slices.Insert(b.ring, b.next, l)
	b.next++
	if b.next == len(b.ring) {
		b.next = 0
	}
	q.lines[who] = l
	return l
}

// peek returns the waiter to admit next: the head of the line whose turn it
// is in the highest band. The queue is not empty.
func (q *waitQueue) peek() *waiter {
	b := q.bands[0]
	return b.ring[b.next].head
}

// admitted takes w, the waiter peek returned, off the queue and passes the
// turn to the band's next tenant.
func (q *waitQueue) admitted(w *waiter) {
	l, b := w.line, w.line.band
	q.remove(w)
	if l.n > 0 {
		// The line stays where it was; its tenant had its turn. (An emptied
		// line left the ring, and next already names the tenant after it.)
		b.next++
		if b.next >= len(b.ring) {
			b.next = 0
		}
	}
}

// remove takes w off its line and the arrival list; an emptied line leaves
// its band's turns, and an emptied band the queue. The turn stays with the
// tenant whose turn it was.
func (q *waitQueue) remove(w *waiter) {
	l, b := w.line, w.line.band
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	l.n--
	if w.older == nil {
		q.first = w.newer
	} else {
		w.older.newer = w.newer
	}
	if w.newer == nil {
		q.last = w.older
	} else {
		w.newer.older = w.older
	}
	q.n--
	w.prev, w.next, w.older, w.newer = nil, nil, nil, nil
	if l.n > 0 {
		return
	}
	i := slices.Index(b.ring, l)
	b.ring = slices.Delete(b.ring, i, i+1)
	if i < b.next {
		b.next--
	}
	if b.next >= len(b.ring) {
		b.next = 0
	}
	delete(q.lines, l.tenant)
	if len(q.spare) < maxSpareLines {
		q.spare = append(q.spare, l)
	}
	if len(b.ring) == 0 {
		delete(q.bandOf, b.priority)
		j := slices.Index(q.bands, b)
		q.bands = slices.Delete(q.bands, j, j+1)
	}
}
