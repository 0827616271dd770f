package memberpoll

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/bounds"
)

// TestMain checks that every test's workers are gone once its cleanups
// (Close, Stop) ran.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reg is a test registration: an id and a configuration value.
type reg struct {
	id  string
	cfg int
}

func (r reg) MemberID() string { return r.id }

// call is one Collect call waiting for the test to answer it.
type call struct {
	ctx   context.Context
	id    string
	reply chan int
}

// fake hands every Collect call to the test. It fails the test if two
// collections of one member ever overlap. With ignoreCtx it waits for the
// answer even after cancellation, until the test ends (done).
type fake struct {
	t         *testing.T
	calls     chan *call
	done      chan struct{}
	ignoreCtx bool

	mu      sync.Mutex
	running map[string]bool
}

func (f *fake) collect(ctx context.Context, m reg, _ time.Time) int {
	f.mu.Lock()
	if f.running[m.id] {
		f.t.Errorf("two collections of %s at once", m.id)
	}
	f.running[m.id] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[m.id] = false
		f.mu.Unlock()
	}()
	c := &call{ctx: ctx, id: m.id, reply: make(chan int, 1)}
	f.calls <- c
	cancelled := ctx.Done()
	if f.ignoreCtx {
		cancelled = nil
	}
	select {
	case v := <-c.reply:
		return v
	case <-cancelled:
	case <-f.done:
	}
	return -1
}

func (f *fake) next(t *testing.T) *call {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no Collect call")
		return nil
	}
}

func (f *fake) idle(t *testing.T) {
	t.Helper()
	select {
	case c := <-f.calls:
		t.Fatalf("unexpected collection of %s", c.id)
	default:
	}
}

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	rt        *Runtime[reg, int, int]
	fake      *fake
	clock     *clocktesting.FakeClock
	collected chan string
}

// newHarness returns a started Runtime with workers workers. The projection
// is the result, or -2 for a member never collected.
func newHarness(t *testing.T, workers int, opts ...func(*Options[reg, int, int])) *harness {
	t.Helper()
	h := &harness{
		fake:      &fake{t: t, calls: make(chan *call, bounds.MaxNodeMembers), done: make(chan struct{}), running: map[string]bool{}},
		clock:     clocktesting.NewFakeClock(epoch),
		collected: make(chan string, bounds.MaxNodeMembers),
	}
	o := Options[reg, int, int]{
		Clock:   h.clock,
		Collect: h.fake.collect,
		Project: func(s State[reg, int], _ time.Time) int {
			if s.Completed.IsZero() {
				return -2
			}
			return s.Result
		},
		Workers:   workers,
		Interval:  time.Second,
		Collected: func(id string) { h.collected <- id },
	}
	for _, f := range opts {
		f(&o)
	}
	h.rt = New(o)
	if err := h.rt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.rt.Stop)
	t.Cleanup(h.rt.Close)
	t.Cleanup(func() { close(h.fake.done) })
	return h
}

func (h *harness) waitCollected(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-h.collected:
		if got != id {
			t.Fatalf("collected %s, want %s", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("collection of %s never finished", id)
	}
}

func tier(key string, ids ...string) Tier[reg] {
	t := Tier[reg]{Key: key}
	for _, id := range ids {
		t.Members = append(t.Members, reg{id: id})
	}
	return t
}

func (h *harness) read(t *testing.T, key string, schedule bool) map[string]int {
	t.Helper()
	m, err := h.rt.Read(key, schedule)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSingleFlight proves concurrent reads and requests cause one
// collection of a member at a time, and that requests made while it runs
// cost exactly one more collection after it.
func TestSingleFlight(t *testing.T) {
	h := newHarness(t, 4)
	if err := h.rt.Reconfigure([]Tier[reg]{tier("t", "a")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			h.read(t, "t", true)
			h.rt.RequestAll()
		})
	}
	wg.Wait()
	first := h.fake.next(t)
	for range 8 {
		h.read(t, "t", true)
		h.rt.RequestAll()
	}
	h.fake.idle(t)
	if s := h.rt.Stats(); s.Pending != 1 || s.Queued != 0 || s.Busy != 1 {
		t.Fatalf("stats = %+v, want one running collection", s)
	}
	first.reply <- 1
	h.waitCollected(t, "a")
	h.fake.next(t).reply <- 2 // the requests made while a ran
	h.waitCollected(t, "a")
	h.fake.idle(t)
	if got := h.read(t, "t", false); got["a"] != 2 {
		t.Fatalf("read = %v, want the latest result", got)
	}
}

// TestFIFOBoundAndOrder proves the queue holds each member at most once,
// however often it is due, and serves members in the order they became due.
func TestFIFOBoundAndOrder(t *testing.T) {
	h := newHarness(t, 1)
	ids := []string{"a", "b", "c", "d", "e"}
	if err := h.rt.Reconfigure([]Tier[reg]{tier("t", ids...)}); err != nil {
		t.Fatal(err)
	}
	h.read(t, "t", true)
	held := h.fake.next(t)
	for range 20 {
		h.clock.Step(2 * time.Second)
		h.read(t, "t", true)
		h.rt.RequestAll()
		if s := h.rt.Stats(); s.Queued != len(ids)-1 || s.Pending != len(ids) {
			t.Fatalf("stats = %+v, want each member pending once", s)
		}
	}
	held.reply <- 0
	h.waitCollected(t, "a")
	for _, id := range ids[1:] {
		c := h.fake.next(t)
		if c.id != id {
			t.Fatalf("collected %s, want %s (FIFO order)", c.id, id)
		}
		c.reply <- 0
		h.waitCollected(t, id)
	}
	h.fake.next(t).reply <- 0 // a was requested again while it ran
	h.waitCollected(t, "a")
	h.fake.idle(t)
}

// TestWorkerBound proves no more than Options.Workers collections run,
// however many members are due, and that the workers start lazily.
func TestWorkerBound(t *testing.T) {
	h := newHarness(t, 2)
	if err := h.rt.Reconfigure([]Tier[reg]{tier("t", "a", "b", "c", "d", "e", "f")}); err != nil {
		t.Fatal(err)
	}
	if s := h.rt.Stats(); s.Workers != 0 {
		t.Fatalf("stats = %+v, want no worker before anything is due", s)
	}
	h.read(t, "t", true)
	h.fake.next(t)
	h.fake.next(t)
	for range 10 {
		h.clock.Step(time.Second)
		h.read(t, "t", true)
	}
	h.fake.idle(t)
	if s := h.rt.Stats(); s.Workers != 2 || s.Busy != 2 || s.Queued != 4 {
		t.Fatalf("stats = %+v, want 2 stalled workers and 4 queued", s)
	}
}

// TestReconfigureCancels proves a changed or removed member's running
// collection is cancelled and discarded and its queue entry dropped, while an
// unchanged member keeps its result.
func TestReconfigureCancels(t *testing.T) {
	h := newHarness(t, 2, func(o *Options[reg, int, int]) { o.MinTierMembers = 2 })
	h.fake.ignoreCtx = true
	if err := h.rt.Reconfigure([]Tier[reg]{tier("t", "a", "b", "c", "d")}); err != nil {
		t.Fatal(err)
	}
	h.read(t, "t", true)
	calls := map[string]*call{}
	for range 2 {
		c := h.fake.next(t)
		calls[c.id] = c
	}
	calls["a"].reply <- 7
	h.waitCollected(t, "a")
	delete(calls, "a")
	if c := h.fake.next(t); c.id != "c" || calls["b"] == nil {
		t.Fatalf("running %s and %v, want b and c", c.id, calls)
	} else {
		calls["c"] = c
	}
	// Keep a, change b's configuration, remove c (running) and d (queued).
	next := tier("t", "a", "b")
	next.Members[1].cfg = 1
	if err := h.rt.Reconfigure([]Tier[reg]{next}); err != nil {
		t.Fatal(err)
	}
	for id, c := range calls {
		if c.ctx.Err() == nil {
			t.Fatalf("collection of %s was not cancelled", id)
		}
	}
	if s := h.rt.Stats(); s.Queued != 0 {
		t.Fatalf("stats = %+v, want the removed member's queue entry dropped", s)
	}
	for id, c := range calls {
		c.reply <- 9 // late results
		h.waitCollected(t, id)
	}
	if got := h.read(t, "t", false); len(got) != 2 || got["a"] != 7 || got["b"] != -2 {
		t.Fatalf("read = %v, want a kept and b without a result", got)
	}
	h.fake.idle(t)
}

// TestStopWaitsAndCloseDoesNot proves Close never blocks on a collection,
// even one that ignores its cancelled context, while Stop returns only once
// every worker has.
func TestStopWaitsAndCloseDoesNot(t *testing.T) {
	h := newHarness(t, 2)
	h.fake.ignoreCtx = true
	if err := h.rt.Reconfigure([]Tier[reg]{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	h.read(t, "t", true)
	a, b := h.fake.next(t), h.fake.next(t)
	h.rt.Close() // returns although both collections hang
	if a.ctx.Err() == nil || b.ctx.Err() == nil {
		t.Fatal("Close did not cancel the running collections")
	}
	stopped := make(chan struct{})
	go func() {
		h.rt.Stop()
		close(stopped)
	}()
	a.reply <- 1
	h.waitCollected(t, a.id)
	select {
	case <-stopped:
		t.Fatal("Stop returned while a worker was collecting")
	default:
	}
	b.reply <- 1
	h.waitCollected(t, b.id)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return once the workers had")
	}
	if got := h.read(t, "t", true); got["a"] != -2 || got["b"] != -2 {
		t.Fatalf("read after Close = %v, want never collected", got)
	}
	if err := h.rt.Reconfigure(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reconfigure after Close = %v", err)
	}
	if err := h.rt.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
}

// TestRequestAndInvalidate proves a Request waits for a collection that
// started after it, not the one in flight, and that Invalidate drops the
// in-flight result.
func TestRequestAndInvalidate(t *testing.T) {
	h := newHarness(t, 2, func(o *Options[reg, int, int]) { o.RequestNew = true })
	if err := h.rt.Reconfigure([]Tier[reg]{tier("t", "a")}); err != nil {
		t.Fatal(err)
	}
	inFlight := h.fake.next(t)
	wait, err := h.rt.Request("t", "a")
	if err != nil {
		t.Fatal(err)
	}
	h.rt.Invalidate("t", "a")
	inFlight.reply <- 1
	h.waitCollected(t, "a")
	if got := h.read(t, "t", false); got["a"] != -2 {
		t.Fatalf("read = %v, want the invalidated result dropped", got)
	}
	h.fake.next(t).reply <- 2
	if v, err := wait(t.Context()); v != 2 || err != nil {
		t.Fatalf("wait = %d, %v; want the requested collection's 2", v, err)
	}
	h.waitCollected(t, "a")
	if _, err := h.rt.Request("t", "zz"); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("Request(unknown) = %v", err)
	}
	wait, _ = h.rt.Request("t", "a")
	h.fake.next(t)
	if err := h.rt.Reconfigure(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t.Context()); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("wait on a removed member = %v", err)
	}
	h.waitCollected(t, "a")
	h.rt.Stop()
	if _, err := h.rt.Request("t", "a"); !errors.Is(err, ErrUnknownTier) {
		t.Fatalf("Request(removed tier) = %v", err)
	}
}

func TestValidate(t *testing.T) {
	bad := errors.New("bad")
	h := newHarness(t, 1, func(o *Options[reg, int, int]) {
		o.MinTierMembers = 2
		o.Validate = func(r reg) error {
			if r.cfg < 0 {
				return bad
			}
			return nil
		}
	})
	if err := h.rt.Reconfigure([]Tier[reg]{tier("keep", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	withCfg := tier("t", "a", "b")
	withCfg.Members[1].cfg = -1
	var full []Tier[reg]
	for i := range bounds.MaxNodeMembers / bounds.MaxMembers {
		tr := Tier[reg]{Key: string(rune('a' + i))}
		for j := range bounds.MaxMembers {
			tr.Members = append(tr.Members, reg{id: string(rune('a' + j))})
		}
		full = append(full, tr)
	}
	for _, tc := range []struct {
		tiers []Tier[reg]
		want  error
	}{
		{tiers: []Tier[reg]{tier("", "a", "b")}, want: ErrInvalidTier},
		{tiers: []Tier[reg]{tier("t", "a", "b"), tier("t", "c", "d")}, want: ErrDuplicateTier},
		{tiers: []Tier[reg]{tier("t", "a")}, want: ErrTierSize},
		{tiers: append(full, tier("x", "a", "b")), want: ErrTooManyMembers},
		{tiers: []Tier[reg]{tier("t", "a", "B")}, want: ErrInvalidMember},
		{tiers: []Tier[reg]{tier("t", "a", "a")}, want: ErrDuplicateMember},
		{tiers: []Tier[reg]{withCfg}, want: bad},
		{tiers: full},
	} {
		if err := h.rt.Reconfigure(tc.tiers); !errors.Is(err, tc.want) {
			t.Errorf("Reconfigure = %v, want %v", err, tc.want)
		}
		if _, err := h.rt.Read("keep", false); tc.want != nil && err != nil {
			t.Errorf("a rejected configuration (%v) changed the runtime", tc.want)
		}
	}
}

// TestMemberRetainsOnlyRegistrationAndResult proves structurally that the
// runtime keeps nothing of a collection but the client's result: a client
// whose result type holds no raw data retains none.
func TestMemberRetainsOnlyRegistrationAndResult(t *testing.T) {
	allowed := map[reflect.Type]bool{
		reflect.TypeFor[State[reg, int]](): true, reflect.TypeFor[bool](): true,
		reflect.TypeFor[uint64](): true, reflect.TypeFor[context.CancelFunc](): true,
	}
	typ := reflect.TypeFor[member[reg, int]]()
	for i := range typ.NumField() {
		if f := typ.Field(i); !allowed[f.Type] {
			t.Errorf("member.%s has type %v", f.Name, f.Type)
		}
	}
	want := map[string]reflect.Type{"Member": reflect.TypeFor[reg](), "Result": reflect.TypeFor[int](),
		"Completed": reflect.TypeFor[time.Time](), "Running": reflect.TypeFor[bool](), "Started": reflect.TypeFor[time.Time]()}
	st := reflect.TypeFor[State[reg, int]]()
	for i := range st.NumField() {
		if f := st.Field(i); want[f.Name] != f.Type {
			t.Errorf("State.%s has type %v", f.Name, f.Type)
		}
	}
}
