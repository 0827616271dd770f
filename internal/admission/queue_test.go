package admission_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/admission"
)

// failSafe bounds every wait of these tests for a result that must come.
const failSafe = 10 * time.Second

// queued is a tier with a queue, a fake clock and a hook that reports each
// request starting to wait.
type queued struct {
	tier   *admission.Tier
	clock  *clocktesting.FakeClock
	ids    []string
	queued chan struct{}
}

// newQueued returns a tier of the given members (one ceiling each) with q.
func newQueued(t testing.TB, ceiling int, q admission.Queue, ids ...string) *queued {
	t.Helper()
	qt := &queued{clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), ids: ids, queued: make(chan struct{}, admission.MaxQueueRequests)}
	tier, err := admission.New(admission.Config{Members: members(ceiling, ids...), Queue: &q}, admission.WithClock(qt.clock),
		admission.WithQueued(func() { qt.queued <- struct{}{} }))
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	qt.tier = tier
	return qt
}

// result is how one Wait ended.
type result struct {
	name   string
	lease  *admission.Lease
	waited admission.Waited
	err    error
}

// wait starts a Wait for who in its own goroutine and returns once the
// request is waiting in the queue; its result arrives on out.
func (qt *queued) wait(t testing.TB, ctx context.Context, name string, who admission.Tenant, out chan result) {
	t.Helper()
	qt.start(ctx, name, who, out)
	select {
	case <-qt.queued:
	case r := <-out:
		t.Fatalf("%s did not wait: lease %v, error %v", name, r.lease != nil, r.err)
	case <-time.After(failSafe):
		t.Fatalf("%s never started waiting", name)
	}
}

// start starts a Wait for who in its own goroutine; its result arrives on
// out.
func (qt *queued) start(ctx context.Context, name string, who admission.Tenant, out chan<- result) {
	go func() {
		l, w, err := qt.tier.Wait(ctx, admission.Inputs{Ready: ready(qt.ids)}, who)
		out <- result{name: name, lease: l, waited: w, err: err}
	}()
}

// next returns the next result or fails the test.
func next(t testing.TB, out <-chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(failSafe):
		t.Fatal("no request left the queue")
		return result{}
	}
}

// none fails the test when a result is ready on out.
func none(t testing.TB, out <-chan result) {
	t.Helper()
	select {
	case r := <-out:
		t.Fatalf("%s left the queue: lease %v, error %v", r.name, r.lease != nil, r.err)
	default:
	}
}

// fill acquires every slot of a tier without waiting and returns the
// leases.
func (qt *queued) fill(t testing.TB, n int) []*admission.Lease {
	t.Helper()
	leases := make([]*admission.Lease, n)
	for i := range leases {
		leases[i] = acquire(t, qt.tier, admission.Inputs{Ready: ready(qt.ids)})
	}
	if _, err := qt.tier.Acquire(admission.Inputs{Ready: ready(qt.ids)}); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire on a full tier: %v, want ErrTierFull", err)
	}
	return leases
}

// order releases one lease at a time (the first of held, then each admitted
// request's own) and returns the names in the order they were admitted.
func order(t testing.TB, held *admission.Lease, out <-chan result, n int) []string {
	t.Helper()
	var names []string
	for range n {
		held.Release()
		r := next(t, out)
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		names = append(names, r.name)
		held = r.lease
	}
	held.Release()
	return names
}

func tenant(name string, priority int) admission.Tenant {
	return admission.Tenant{Name: name, Priority: priority}
}

var q10 = admission.Queue{MaxRequests: 10, MaxWait: time.Minute}

// TestWaitFIFOWithinTenant: one tenant's requests are admitted in the order
// they started waiting, each when a lease is released.
func TestWaitFIFOWithinTenant(t *testing.T) {
	qt := newQueued(t, 1, q10, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 4)
	for i := range 4 {
		qt.wait(t, t.Context(), fmt.Sprint(i), tenant("t", 0), out)
	}
	none(t, out)
	if got := fmt.Sprint(order(t, held, out, 4)); got != "[0 1 2 3]" {
		t.Errorf("admission order = %s, want [0 1 2 3]", got)
	}
	if s := qt.tier.Snapshot(); s.Active != 0 {
		t.Errorf("active = %d after every release, want 0", s.Active)
	}
}

// TestWaitRoundRobinBetweenTenants: tenants of one band take turns, each
// tenant's requests in order, a tenant that starts waiting later joining
// the end of the turns.
func TestWaitRoundRobinBetweenTenants(t *testing.T) {
	qt := newQueued(t, 1, q10, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 8)
	for _, w := range []struct{ name, tenant string }{
		{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"a4", "a"}, {"c1", "c"}, {"b2", "b"},
	} {
		qt.wait(t, t.Context(), w.name, tenant(w.tenant, 0), out)
	}
	if got, want := fmt.Sprint(order(t, held, out, 7)), "[a1 b1 c1 a2 b2 a3 a4]"; got != want {
		t.Errorf("admission order = %s, want %s", got, want)
	}
}

// TestWaitStrictPriorityBands: a higher band is always admitted first,
// whenever its requests started waiting; a band's tenants take turns.
func TestWaitStrictPriorityBands(t *testing.T) {
	qt := newQueued(t, 1, q10, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 8)
	for _, w := range []struct {
		name string
		who  admission.Tenant
	}{
		{"low1", tenant("batch", -5)}, {"mid1", tenant("web", 0)}, {"high1", tenant("vip", 10)},
		{"low2", tenant("batch", -5)}, {"high2", tenant("ops", 10)}, {"mid2", tenant("web", 0)}, {"high3", tenant("vip", 10)},
	} {
		qt.wait(t, t.Context(), w.name, w.who, out)
	}
	if got, want := fmt.Sprint(order(t, held, out, 7)), "[high1 high2 high3 mid1 mid2 low1 low2]"; got != want {
		t.Errorf("admission order = %s, want %s", got, want)
	}
}

// TestWaitTimeout: a request not admitted within MaxWait leaves with
// ErrQueueTimeout, having waited exactly MaxWait by the tier's clock, and
// holds no lease; the queue is empty again.
func TestWaitTimeout(t *testing.T) {
	qt := newQueued(t, 1, admission.Queue{MaxRequests: 4, MaxWait: 2 * time.Second}, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 1)
	qt.wait(t, t.Context(), "late", tenant("t", 0), out)
	qt.clock.Step(2*time.Second - time.Millisecond)
	none(t, out)
	qt.clock.Step(time.Millisecond)
	r := next(t, out)
	if !errors.Is(r.err, admission.ErrQueueTimeout) || r.lease != nil {
		t.Fatalf("after MaxWait: lease %v, error %v; want ErrQueueTimeout", r.lease != nil, r.err)
	}
	if !r.waited.Queued || r.waited.Duration != 2*time.Second {
		t.Errorf("waited = %+v, want queued for 2s", r.waited)
	}
	if s := qt.tier.QueueStats(); s.Waiting != 0 {
		t.Errorf("waiting = %d after the timeout, want 0", s.Waiting)
	}
	held.Release()
	if s := qt.tier.Snapshot(); s.Active != 0 {
		t.Errorf("active = %d, want 0: the timed-out request must hold no lease", s.Active)
	}
}

// TestWaitQueueFull: beyond MaxRequests, or beyond a tenant's share, an
// arrival is refused at once with ErrQueueFull; another tenant still waits.
func TestWaitQueueFull(t *testing.T) {
	qt := newQueued(t, 1, admission.Queue{MaxRequests: 3, MaxWait: time.Minute, MaxRequestsPerTenant: 2}, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 8)
	qt.wait(t, t.Context(), "heavy1", tenant("heavy", 0), out)
	qt.wait(t, t.Context(), "heavy2", tenant("heavy", 0), out)
	if _, _, err := qt.tier.Wait(t.Context(), admission.Inputs{Ready: ready(qt.ids)}, tenant("heavy", 0)); !errors.Is(err, admission.ErrQueueFull) {
		t.Fatalf("a third request of the tenant: %v, want ErrQueueFull", err)
	}
	qt.wait(t, t.Context(), "light1", tenant("light", 0), out)
	if _, _, err := qt.tier.Wait(t.Context(), admission.Inputs{Ready: ready(qt.ids)}, tenant("light", 0)); !errors.Is(err, admission.ErrQueueFull) {
		t.Fatalf("a request past MaxRequests: %v, want ErrQueueFull", err)
	}
	if s := qt.tier.QueueStats(); s.Waiting != 3 || s.MaxRequests != 3 {
		t.Errorf("stats = %+v, want 3 of 3 waiting", s)
	}
	if got, want := fmt.Sprint(order(t, held, out, 3)), "[heavy1 light1 heavy2]"; got != want {
		t.Errorf("admission order = %s, want %s", got, want)
	}
}

// TestWaitClientGone: a request whose context ends leaves the queue at once
// with ErrClientGone and never holds a lease; the next release admits the
// request behind it.
func TestWaitClientGone(t *testing.T) {
	qt := newQueued(t, 1, q10, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 2)
	ctx, cancel := context.WithCancel(t.Context())
	qt.wait(t, ctx, "gone", tenant("t", 0), out)
	qt.wait(t, t.Context(), "stays", tenant("t", 0), out)
	cancel()
	r := next(t, out)
	if r.name != "gone" || !errors.Is(r.err, admission.ErrClientGone) || !errors.Is(r.err, context.Canceled) || r.lease != nil {
		t.Fatalf("%s: lease %v, error %v; want gone with ErrClientGone", r.name, r.lease != nil, r.err)
	}
	if s := qt.tier.QueueStats(); s.Waiting != 1 {
		t.Errorf("waiting = %d after the client left, want 1", s.Waiting)
	}
	if got := fmt.Sprint(order(t, held, out, 1)); got != "[stays]" {
		t.Errorf("admitted %s, want [stays]", got)
	}
	if s := qt.tier.Snapshot(); s.Active != 0 {
		t.Errorf("active = %d, want 0", s.Active)
	}
}

// TestWaitRefusedWhenTierStops: waiting requests get the refusal of a tier
// that admits nothing for a reason other than capacity, at once: tier
// quiesce, every member quiesced, and handing admission over.
func TestWaitRefusedWhenTierStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*admission.Tier) error
		want []error
	}{
		{"tier quiesced", func(tr *admission.Tier) error { return tr.Quiesce(admission.TierScope(), "maintenance") }, []error{admission.ErrTierQuiesced}},
		{"intent quiesces the tier", func(tr *admission.Tier) error {
			return tr.SetIntent(admission.Intent{Tier: "maintenance"})
		}, []error{admission.ErrTierQuiesced}},
		{"last member quiesced", func(tr *admission.Tier) error { return tr.Quiesce(admission.MemberScope("a"), "swap") }, []error{admission.ErrNoEligibleMember}},
		{"handed over", func(tr *admission.Tier) error {
			_, _, err := tr.HandOver(make(chan struct{}, 1))
			return err
		}, []error{admission.ErrTierQuiesced, admission.ErrQueueHandedOver}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qt := newQueued(t, 1, q10, "a")
			held := qt.fill(t, 1)[0]
			out := make(chan result, 2)
			qt.wait(t, t.Context(), "w1", tenant("t", 0), out)
			qt.wait(t, t.Context(), "w2", tenant("u", 3), out)
			if err := tc.stop(qt.tier); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				r := next(t, out)
				for _, want := range tc.want {
					if !errors.Is(r.err, want) || r.lease != nil {
						t.Errorf("%s: lease %v, error %v; want %v", r.name, r.lease != nil, r.err, want)
					}
				}
			}
			held.Release()
			if s := qt.tier.Snapshot(); s.Active != 0 {
				t.Errorf("active = %d, want 0", s.Active)
			}
		})
	}
}

// TestWaitReconfigure: a reconfiguration that lowers the queue's bounds
// sends the newest waiters away with ErrQueueFull, a shorter MaxWait times
// out those that waited longer, a raised ceiling admits waiters at once,
// and removing the queue refuses the rest with ErrTierFull.
func TestWaitReconfigure(t *testing.T) {
	qt := newQueued(t, 1, q10, "a", "b")
	qt.fill(t, 2)
	out := make(chan result, 8)
	for i := range 6 {
		qt.wait(t, t.Context(), fmt.Sprint(i), tenant("t", 0), out)
		qt.clock.Step(time.Second)
	}
	cfg := admission.Config{Members: members(1, "a", "b"), Queue: &admission.Queue{MaxRequests: 5, MaxWait: time.Minute}}
	if err := qt.tier.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if r := next(t, out); r.name != "5" || !errors.Is(r.err, admission.ErrQueueFull) {
		t.Fatalf("%s left with %v, want 5 with ErrQueueFull", r.name, r.err)
	}
	// 0 waited 6s, 1 waited 5s: a MaxWait of 5s times both out.
	cfg.Queue.MaxWait = 5 * time.Second
	if err := qt.tier.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for range 2 {
		r := next(t, out)
		if !errors.Is(r.err, admission.ErrQueueTimeout) {
			t.Fatalf("%s left with %v, want ErrQueueTimeout", r.name, r.err)
		}
		left[r.name] = true
	}
	if !left["0"] || !left["1"] {
		t.Fatalf("%v timed out, want 0 and 1", left)
	}
	// 2 waited 4s: its deadline is now 1s away.
	qt.clock.Step(time.Second)
	if r := next(t, out); r.name != "2" || !errors.Is(r.err, admission.ErrQueueTimeout) {
		t.Fatalf("%s left with %v, want 2 with ErrQueueTimeout", r.name, r.err)
	}
	// A raised ceiling admits 3 at once.
	cfg.Members = members(1, "a", "b", "c")
	if err := qt.tier.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if r := next(t, out); r.name != "3" || r.err != nil || r.lease.Member() != "c" {
		t.Fatalf("%s left with %v, want 3 admitted to c", r.name, r.err)
	}
	cfg.Queue = nil
	if err := qt.tier.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if r := next(t, out); r.name != "4" || !errors.Is(r.err, admission.ErrTierFull) {
		t.Fatalf("%s left with %v, want 4 with ErrTierFull", r.name, r.err)
	}
	none(t, out)
}

// TestWaitDispatchOnReadmitAndReady: a readmitted member admits waiters at
// once, and Dispatch admits them when a member turns ready, on the inputs
// WithInputs gives.
func TestWaitDispatchOnReadmitAndReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	var readyB atomic.Bool
	inputs := func() admission.Inputs {
		r := ready([]string{"a", "b"})
		r["b"] = readyB.Load()
		return admission.Inputs{Ready: r}
	}
	queuedCh := make(chan struct{}, 4)
	tier, err := admission.New(admission.Config{Members: members(1, "a", "b"), Queue: &q10}, admission.WithClock(clk), admission.WithInputs(inputs),
		admission.WithQueued(func() { queuedCh <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	qt := &queued{tier: tier, clock: clk, ids: []string{"a", "b"}, queued: queuedCh}
	if err := tier.Quiesce(admission.MemberScope("b"), "swap"); err != nil {
		t.Fatal(err)
	}
	acquire(t, tier, admission.Inputs{Ready: ready(qt.ids)})
	out := make(chan result, 2)
	qt.wait(t, t.Context(), "w1", tenant("t", 0), out)
	qt.wait(t, t.Context(), "w2", tenant("t", 0), out)
	// Readmitted but not ready: nothing moves.
	if err := tier.Readmit(admission.MemberScope("b")); err != nil {
		t.Fatal(err)
	}
	none(t, out)
	readyB.Store(true)
	tier.Dispatch()
	if r := next(t, out); r.name != "w1" || r.err != nil || r.lease.Member() != "b" {
		t.Fatalf("%s left with %v, want w1 admitted to b", r.name, r.err)
	}
	none(t, out)
}

// TestAcquireDoesNotOvertakeWaiters: with requests waiting, an Acquire that
// does not wait admits the waiters first and is refused itself while they
// fill the tier.
func TestAcquireDoesNotOvertakeWaiters(t *testing.T) {
	qt := newQueued(t, 1, q10, "a")
	held := qt.fill(t, 1)[0]
	out := make(chan result, 1)
	qt.wait(t, t.Context(), "w", tenant("t", 0), out)
	if _, err := qt.tier.Acquire(admission.Inputs{Ready: ready(qt.ids)}); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("Acquire with a waiter ahead: %v, want ErrTierFull", err)
	}
	if got := fmt.Sprint(order(t, held, out, 1)); got != "[w]" {
		t.Errorf("admitted %s, want [w]", got)
	}
}

// TestWaitWithoutQueue: a tier without a queue refuses at once, as Acquire
// does, and an invalid priority is refused before anything.
func TestWaitWithoutQueue(t *testing.T) {
	tier := newTier(t, admission.Config{Members: members(1, "a")})
	in := admission.Inputs{Ready: ready([]string{"a"})}
	l, w, err := tier.Wait(t.Context(), in, tenant("t", 0))
	if err != nil || w.Queued {
		t.Fatalf("Wait on an empty tier: %v, %+v", err, w)
	}
	if _, w, err := tier.Wait(t.Context(), in, tenant("t", 0)); !errors.Is(err, admission.ErrTierFull) || w.Queued {
		t.Fatalf("Wait on a full tier without a queue: %v, %+v; want ErrTierFull at once", err, w)
	}
	l.Release()
	if _, _, err := tier.Wait(t.Context(), in, tenant("t", admission.MaxPriority+1)); !errors.Is(err, admission.ErrInvalidInput) {
		t.Fatalf("priority past MaxPriority: %v, want ErrInvalidInput", err)
	}
	if s := tier.Snapshot(); s.Active != 0 {
		t.Errorf("active = %d, want 0", s.Active)
	}
}

// TestWaitThousandWaitersKeepCeilings: 1000 concurrent requests through a
// tier of 4 members with ceiling 2 and a queue of 1000: every one is
// served, no member and not the tier ever holds more than its ceiling, and
// every lease is returned.
func TestWaitThousandWaitersKeepCeilings(t *testing.T) {
	const n, ceiling = 1000, 2
	all := []string{"a", "b", "c", "d"}
	tier, err := admission.New(admission.Config{Members: members(ceiling, all...), Queue: &admission.Queue{MaxRequests: n, MaxWait: admission.MaxQueueWait}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	inFlight := map[string]int{}
	total, over := 0, ""
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			l, _, err := tier.Wait(context.Background(), admission.Inputs{Ready: ready(all)}, tenant(fmt.Sprint(i%7), i%3))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			inFlight[l.Member()]++
			total++
			if inFlight[l.Member()] > ceiling || total > ceiling*len(all) {
				over = fmt.Sprintf("member %s holds %d, tier %d", l.Member(), inFlight[l.Member()], total)
			}
			mu.Unlock()
			mu.Lock()
			inFlight[l.Member()]--
			total--
			mu.Unlock()
			l.Release()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Wait() error = %v", err)
	}
	if over != "" {
		t.Errorf("a ceiling was passed: %s", over)
	}
	if s := tier.Snapshot(); s.Active != 0 || tier.QueueStats().Waiting != 0 {
		t.Errorf("after all: active %d, waiting %d; want 0 and 0", s.Active, tier.QueueStats().Waiting)
	}
}

// TestQueueRefusesInvalidConfig: every rule of Queue, at and past its bounds.
func TestQueueRefusesInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		q  admission.Queue
		ok bool
	}{
		{admission.Queue{MaxRequests: 1, MaxWait: admission.MinQueueWait}, true},
		{admission.Queue{MaxRequests: admission.MaxQueueRequests, MaxWait: admission.MaxQueueWait, MaxRequestsPerTenant: admission.MaxQueueRequests}, true},
		{admission.Queue{MaxRequests: 0, MaxWait: time.Second}, false},
		{admission.Queue{MaxRequests: admission.MaxQueueRequests + 1, MaxWait: time.Second}, false},
		{admission.Queue{MaxRequests: 5, MaxWait: admission.MinQueueWait - 1}, false},
		{admission.Queue{MaxRequests: 5, MaxWait: admission.MaxQueueWait + 1}, false},
		{admission.Queue{MaxRequests: 5, MaxWait: time.Second, MaxRequestsPerTenant: 6}, false},
		{admission.Queue{MaxRequests: 5, MaxWait: time.Second, MaxRequestsPerTenant: -1}, false},
	} {
		_, err := admission.New(admission.Config{Members: members(1, "a"), Queue: &tc.q})
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, admission.ErrInvalidConfig)) {
			t.Errorf("New with queue %+v: error = %v, want ok=%v", tc.q, err, tc.ok)
		}
	}
}
