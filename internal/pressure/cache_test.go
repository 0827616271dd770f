package pressure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/memberpoll"
	"github.com/sluice-dev/sluice/internal/scheduler"
)

// reply is what a fakeCall returns.
type reply struct {
	t   scheduler.Telemetry
	err error
}

// fakeCall is one Collect call waiting for the test to answer it.
type fakeCall struct {
	ctx    context.Context
	target Target
	reply  chan reply
}

// answer completes the call.
func (c *fakeCall) answer(t scheduler.Telemetry, err error) { c.reply <- reply{t: t, err: err} }

// member returns the member id encoded in the call's URL.
func (c *fakeCall) member() string {
	return c.target.MetricsURL[strings.LastIndexByte(c.target.MetricsURL, '/')+1:]
}

// fakeCollector hands every Collect call to the test and blocks until the
// test answers it or the context ends. With ignoreCtx it waits for the answer
// even after cancellation, to model a late result.
type fakeCollector struct {
	calls     chan *fakeCall
	n         atomic.Int64
	ignoreCtx bool
}

func newFakeCollector() *fakeCollector {
	return &fakeCollector{calls: make(chan *fakeCall, bounds.MaxNodeMembers)}
}

func (f *fakeCollector) Collect(ctx context.Context, target Target) (scheduler.Telemetry, error) {
	f.n.Add(1)
	c := &fakeCall{ctx: ctx, target: target, reply: make(chan reply, 1)}
	f.calls <- c
	if f.ignoreCtx {
		r := <-c.reply
		return r.t, r.err
	}
	select {
	case r := <-c.reply:
		return r.t, r.err
	case <-ctx.Done():
		return scheduler.Telemetry{}, ctx.Err()
	}
}

// next returns the next call, failing the test if none arrives.
func (f *fakeCollector) next(t testing.TB) *fakeCall {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no Collect call")
		return nil
	}
}

// idle asserts that no Collect call is waiting to be taken.
func (f *fakeCollector) idle(t *testing.T) {
	t.Helper()
	select {
	case c := <-f.calls:
		t.Fatalf("unexpected Collect call for %s", c.member())
	default:
	}
}

// harness is a Cache with a fake clock, a fake collector and a publication
// hook.
type harness struct {
	c         *Cache
	clock     *clocktesting.FakeClock
	coll      *fakeCollector
	published chan string
}

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		clock:     clocktesting.NewFakeClock(epoch),
		coll:      newFakeCollector(),
		published: make(chan string, bounds.MaxNodeMembers),
	}
	h.c = New(Options{Clock: h.clock, Collector: h.coll, Sampled: func(id string) { h.published <- id }})
	t.Cleanup(h.c.Close)
	return h
}

// waitPublished waits until a worker has published (or discarded) a refresh
// of member id.
func (h *harness) waitPublished(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-h.published:
		if got != id {
			t.Fatalf("published %s, want %s", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("refresh of %s never published", id)
	}
}

type stats struct{ workers, busy, queued, pending int }

func (c *Cache) stats() stats {
	s := c.polls.Stats()
	return stats{workers: s.Workers, busy: s.Busy, queued: s.Queued, pending: s.Pending}
}

// member returns the state of one member for white-box checks.
func (c *Cache) member(t *testing.T, tier, id string) memberpoll.State[Member, scheduler.Pressure] {
	t.Helper()
	s, err := c.polls.Lookup(tier, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tier(key string, ids ...string) Tier {
	t := Tier{Key: key}
	for _, id := range ids {
		t.Members = append(t.Members, Member{
			ID: id, MetricsURL: "http://127.0.0.1:9000/" + id, Engine: "vllm", Capacity: 10,
		})
	}
	return t
}

func mustSnapshot(t testing.TB, c *Cache, key string) map[string]scheduler.Pressure {
	t.Helper()
	m, err := c.Snapshot(key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustPeek(t *testing.T, c *Cache, key string) map[string]scheduler.Pressure {
	t.Helper()
	m, err := c.Peek(key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// telemetry is a valid sample: 3 running + 2 waiting, KV 0.25.
func telemetry() scheduler.Telemetry {
	return scheduler.Telemetry{Running: f64(3), Waiting: f64(2), KVUsage: f64(0.25)}
}

var (
	// freshFive is telemetry() on a member of capacity 10.
	freshFive = scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 500000,
		RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}
	failed = scheduler.Pressure{Freshness: scheduler.FreshnessFailed,
		RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}
	unknown = scheduler.UnknownPressure()
)

func TestConcurrentSnapshotsCauseOneRequest(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("ns/t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := h.c.Snapshot("ns/t")
			if err != nil || len(m) != 2 {
				t.Errorf("Snapshot = %v, %v", m, err)
			}
		}()
	}
	wg.Wait()
	if s := h.c.stats(); s.pending != 2 || s.queued+s.busy != 2 {
		t.Fatalf("stats = %+v, want one pending refresh per member", s)
	}
	calls := map[string]*fakeCall{}
	for range 2 {
		c := h.coll.next(t)
		calls[c.member()] = c
	}
	for range 8 {
		mustSnapshot(t, h.c, "ns/t")
	}
	h.coll.idle(t)
	for _, id := range []string{"a", "b"} {
		calls[id].answer(telemetry(), nil)
		h.waitPublished(t, id)
	}
	h.coll.idle(t)
	if n := h.coll.n.Load(); n != 2 {
		t.Fatalf("%d metrics requests, want 2", n)
	}
	h.c.Close()
}

func TestFreshHitNoIOAndExpiry(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	if got := mustSnapshot(t, h.c, "t"); got["a"] != unknown || got["b"] != unknown {
		t.Fatalf("first snapshot = %v, want unknown before any sample", got)
	}
	for range 2 {
		c := h.coll.next(t)
		c.answer(telemetry(), nil)
		h.waitPublished(t, c.member())
	}
	for _, step := range []time.Duration{0, 500 * time.Millisecond, 499 * time.Millisecond} {
		h.clock.Step(step)
		if got := mustSnapshot(t, h.c, "t"); got["a"] != freshFive || got["b"] != freshFive {
			t.Fatalf("snapshot = %v, want fresh", got)
		}
	}
	h.coll.idle(t)
	if s := h.c.stats(); s.pending != 0 || s.queued != 0 {
		t.Fatalf("fresh hit scheduled work: %+v", s)
	}

	// One second after completion both samples are due: exactly one refresh
	// each, however many snapshots ask.
	h.clock.Step(time.Millisecond)
	for range 5 {
		if got := mustSnapshot(t, h.c, "t"); got["a"] != freshFive {
			t.Fatalf("snapshot while refreshing = %v, want the retained fresh sample", got)
		}
	}
	if s := h.c.stats(); s.pending != 2 {
		t.Fatalf("stats = %+v, want 2 pending", s)
	}
	for range 2 {
		c := h.coll.next(t)
		c.answer(scheduler.Telemetry{Running: f64(0), Waiting: f64(0)}, nil)
		h.waitPublished(t, c.member())
	}
	h.coll.idle(t)
	if n := h.coll.n.Load(); n != 4 {
		t.Fatalf("%d metrics requests, want 4", n)
	}
	want := scheduler.Pressure{Freshness: scheduler.FreshnessFresh, RequestState: scheduler.SignalValid,
		KVState: scheduler.SignalMissing}
	if got := mustPeek(t, h.c, "t"); got["a"] != want {
		t.Fatalf("after refresh = %+v, want %+v", got["a"], want)
	}
	h.c.Close()
}

func TestClassification(t *testing.T) {
	tests := []struct {
		name    string
		elapsed time.Duration // fake time spent inside Collect
		tel     scheduler.Telemetry
		err     error
		want    scheduler.Pressure
	}{
		{name: "valid", tel: telemetry(), want: freshFive},
		{name: "valid at exactly FetchTimeout", elapsed: FetchTimeout, tel: telemetry(), want: freshFive},
		{name: "valid data after FetchTimeout is failed", elapsed: FetchTimeout + time.Millisecond, tel: telemetry(), want: failed},
		{name: "timeout", err: ErrTimeout, want: failed},
		{name: "transport", err: ErrTransport, want: failed},
		{name: "http status", err: fmt.Errorf("%w: 503", ErrHTTPStatus), want: failed},
		{name: "context cancelled", err: context.Canceled, want: failed},
		{name: "unclassified collector error", err: errors.New("boom"), want: failed},
		{name: "parse", err: fmt.Errorf("%w: line 3", ErrParse), want: unknown},
		{name: "missing series", err: ErrMissingSeries, want: unknown},
		{name: "oversized body", err: ErrBodyTooLarge, want: unknown},
		{
			name: "NaN", tel: scheduler.Telemetry{Running: f64(math.NaN()), Waiting: f64(1), KVUsage: f64(0.5)},
			want: scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, RequestState: scheduler.SignalInvalid, KVState: scheduler.SignalValid},
		},
		{
			name: "+Inf KV", tel: scheduler.Telemetry{Running: f64(1), Waiting: f64(1), KVUsage: f64(math.Inf(1))},
			want: scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, RequestState: scheduler.SignalValid, KVState: scheduler.SignalInvalid},
		},
		{
			name: "negative count", tel: scheduler.Telemetry{Running: f64(-1), Waiting: f64(1)},
			want: scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, RequestState: scheduler.SignalInvalid, KVState: scheduler.SignalMissing},
		},
		{
			name: "KV alone is fresh", tel: scheduler.Telemetry{KVUsage: f64(0.125)},
			want: scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 125000, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalValid},
		},
		{
			name: "running without waiting has no valid signal", tel: scheduler.Telemetry{Running: f64(1)},
			want: scheduler.Pressure{Freshness: scheduler.FreshnessUnknown, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			h := newHarness(t)
			if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
				t.Fatal(err)
			}
			mustSnapshot(t, h.c, "t")
			calls := map[string]*fakeCall{}
			for range 2 {
				c := h.coll.next(t)
				calls[c.member()] = c
			}
			h.clock.Step(tc.elapsed)
			calls["a"].answer(tc.tel, tc.err)
			h.waitPublished(t, "a")

			st := h.c.member(t, "t", "a")
			sample, observedAt, sampled := st.Result, st.Completed, !st.Completed.IsZero()
			if !sampled || sample != tc.want || !observedAt.Equal(h.clock.Now()) {
				t.Fatalf("retained %+v at %v (sampled %v), want %+v at %v", sample, observedAt, sampled, tc.want, h.clock.Now())
			}
			if got := mustPeek(t, h.c, "t"); got["a"] != tc.want {
				t.Fatalf("Peek = %+v, want %+v", got["a"], tc.want)
			}
			h.c.Close()
		})
	}
}

// TestRetainsNoRawData proves structurally that a member's state cannot hold
// telemetry, raw text or an error: only its registration, normalized
// pressure and times. The runtime's own member type keeps nothing but the
// registration, this result and scheduling fields (memberpoll's
// TestMemberRetainsOnlyRegistrationAndResult).
func TestRetainsNoRawData(t *testing.T) {
	forbidden := map[reflect.Type]bool{
		reflect.TypeFor[error]():               true,
		reflect.TypeFor[scheduler.Telemetry](): true,
		reflect.TypeFor[[]byte]():              true,
		reflect.TypeFor[*float64]():            true,
		reflect.TypeFor[any]():                 true,
	}
	structs := map[reflect.Type]bool{
		reflect.TypeFor[time.Time]():          true,
		reflect.TypeFor[scheduler.Pressure](): true,
		reflect.TypeFor[Member]():             true,
		reflect.TypeFor[Series]():             true,
	}
	check := func(typ reflect.Type, allowedStrings map[string]bool) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if forbidden[f.Type] {
				t.Errorf("%s.%s has type %v", typ.Name(), f.Name, f.Type)
			}
			if (f.Type.Kind() == reflect.String && !allowedStrings[f.Name]) || f.Type.Kind() == reflect.Struct && !structs[f.Type] {
				t.Errorf("%s.%s (%v) could hold raw data", typ.Name(), f.Name, f.Type)
			}
		}
	}
	check(reflect.TypeFor[memberpoll.State[Member, scheduler.Pressure]](), nil)
	check(reflect.TypeFor[Member](), map[string]bool{"ID": true, "MetricsURL": true, "Engine": true})
	// A member's series are its configured selectors, never scraped text.
	check(reflect.TypeFor[Series](), map[string]bool{"Running": true, "Waiting": true, "KVUsage": true})
}

func TestAgingAtReadTime(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	for range 2 {
		c := h.coll.next(t)
		c.answer(telemetry(), nil)
		h.waitPublished(t, c.member())
	}
	h.clock.Step(scheduler.MaxSampleAge)
	if got := mustPeek(t, h.c, "t"); got["a"] != freshFive {
		t.Fatalf("at MaxSampleAge = %+v, want fresh", got["a"])
	}
	h.clock.Step(time.Millisecond)
	stale := scheduler.Pressure{Freshness: scheduler.FreshnessStale, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}
	if got := mustPeek(t, h.c, "t"); got["a"] != stale {
		t.Fatalf("past MaxSampleAge = %+v, want %+v", got["a"], stale)
	}
	h.clock.SetTime(epoch.Add(-time.Second))
	if got := mustPeek(t, h.c, "t"); got["a"].Freshness != scheduler.FreshnessUnknown || got["a"].PPM != 0 {
		t.Fatalf("sample from the future = %+v, want unknown", got["a"])
	}
	h.coll.idle(t)
	if s := h.c.stats(); s.workers > MaxWorkers || s.pending != 0 {
		t.Fatalf("Peek scheduled work: %+v", s)
	}
	h.c.Close()
}

func TestOverdueFetchProjectsFailed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	calls := map[string]*fakeCall{}
	for range 2 {
		c := h.coll.next(t)
		calls[c.member()] = c
	}
	calls["b"].answer(telemetry(), nil)
	h.waitPublished(t, "b")

	h.clock.Step(FetchTimeout)
	if got := mustPeek(t, h.c, "t"); got["a"] != unknown {
		t.Fatalf("running for exactly FetchTimeout = %+v, want unknown (not yet overdue)", got["a"])
	}
	h.clock.Step(time.Millisecond)
	if got := mustSnapshot(t, h.c, "t"); got["a"] != failed {
		t.Fatalf("overdue = %+v, want failed", got["a"])
	}
	// The overdue fetch is still pending: no second request for it.
	if !h.c.member(t, "t", "a").Running {
		t.Fatal("overdue member lost its single-flight mark")
	}
	calls["a"].answer(telemetry(), nil)
	h.waitPublished(t, "a")
	if got := mustPeek(t, h.c, "t"); got["a"] != failed {
		t.Fatalf("late valid data = %+v, want failed", got["a"])
	}
	h.c.Close()
}

func TestStalledMemberDoesNotDelayAnother(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	calls := map[string]*fakeCall{}
	for range 2 {
		c := h.coll.next(t)
		calls[c.member()] = c
	}
	// a stalls; b completes and keeps refreshing on the other worker.
	for i := range 3 {
		calls["b"].answer(telemetry(), nil)
		h.waitPublished(t, "b")
		if got := mustSnapshot(t, h.c, "t"); got["b"] != freshFive {
			t.Fatalf("round %d: b = %+v, want fresh", i, got["b"])
		}
		h.clock.Step(RefreshInterval)
		mustSnapshot(t, h.c, "t")
		c := h.coll.next(t)
		if c.member() != "b" {
			t.Fatalf("round %d: refresh of %s, want b", i, c.member())
		}
		calls["b"] = c
	}
	if got := mustSnapshot(t, h.c, "t"); got["a"] != failed {
		t.Fatalf("stalled a = %+v, want failed", got["a"])
	}
	h.c.Close()
}

func TestTwoStalledCollectors(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	tiers := []Tier{tier("x", "a", "b", "c"), tier("y", "a", "b")}
	registered := 5
	if err := h.c.Reconfigure(tiers); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "x")
	mustSnapshot(t, h.c, "y")
	h.coll.next(t)
	h.coll.next(t) // both workers now stalled
	for i := range 50 {
		h.clock.Step(700 * time.Millisecond)
		for _, key := range []string{"x", "y"} {
			m := mustSnapshot(t, h.c, key)
			if len(m) != map[string]int{"x": 3, "y": 2}[key] {
				t.Fatalf("snapshot of %s is incomplete: %v", key, m)
			}
		}
		s := h.c.stats()
		if s.workers != MaxWorkers || s.busy != MaxWorkers {
			t.Fatalf("round %d: %+v, want exactly %d stalled workers", i, s, MaxWorkers)
		}
		if s.queued > registered || s.pending > registered {
			t.Fatalf("round %d: queue %+v exceeds %d registered members", i, s, registered)
		}
	}
	h.coll.idle(t)
	if n := h.coll.n.Load(); n != 2 {
		t.Fatalf("%d collections started, want 2", n)
	}
	// Every member reads failed (the two stalled ones overdue) or unknown.
	for _, key := range []string{"x", "y"} {
		for id, p := range mustPeek(t, h.c, key) {
			if p != failed && p != unknown {
				t.Fatalf("%s/%s = %+v", key, id, p)
			}
		}
	}
	h.c.Close()
}

func TestClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	h.coll.ignoreCtx = true
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b", "c")}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	calls := map[string]*fakeCall{}
	for range 2 {
		c := h.coll.next(t)
		calls[c.member()] = c
	}
	if s := h.c.stats(); s.queued != 1 {
		t.Fatalf("stats = %+v, want one queued refresh", s)
	}
	var running []string
	for id := range calls {
		running = append(running, id)
	}

	h.c.Close()
	h.c.Close() // idempotent
	for _, c := range calls {
		if c.ctx.Err() == nil {
			t.Fatal("Close did not cancel a running fetch")
		}
	}
	if s := h.c.stats(); s.queued != 0 || s.pending != 2 {
		// The two running fetches keep their mark until they return.
		t.Fatalf("after Close: %+v, want empty queue", s)
	}
	// Late valid results are discarded.
	for _, id := range running {
		calls[id].answer(telemetry(), nil)
		h.waitPublished(t, id)
		if st := h.c.member(t, "t", id); !st.Completed.IsZero() {
			t.Fatalf("late result of %s was published", id)
		}
	}
	h.clock.Step(10 * time.Second)
	for range 3 {
		got := mustSnapshot(t, h.c, "t")
		if len(got) != 3 {
			t.Fatalf("snapshot after Close = %v, want every member", got)
		}
		for id, p := range got {
			if p != unknown {
				t.Fatalf("%s after Close = %+v, want unknown", id, p)
			}
		}
	}
	h.coll.idle(t)
	if n := h.coll.n.Load(); n != 2 {
		t.Fatalf("%d collections, want 2", n)
	}
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); !errors.Is(err, memberpoll.ErrClosed) {
		t.Fatalf("Reconfigure after Close = %v, want memberpoll.ErrClosed", err)
	}
}

func TestCloseStopsIdleWorkers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	for range 2 {
		c := h.coll.next(t)
		c.answer(telemetry(), nil)
		h.waitPublished(t, c.member())
	}
	if s := h.c.stats(); s.workers != 2 || s.busy != 0 {
		t.Fatalf("stats = %+v, want two idle workers", s)
	}
	h.c.Close()
}

func TestNoMetricsMemberIsNeverSampled(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	tr := Tier{Key: "t", Members: []Member{{ID: "a", Capacity: 4}, {ID: "b", Capacity: 4, MetricsURL: "not a url"}}}
	if err := h.c.Reconfigure([]Tier{tr}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got := mustSnapshot(t, h.c, "t")
		if len(got) != 2 || got["a"] != unknown || got["b"] != unknown {
			t.Fatalf("snapshot = %v, want unknown", got)
		}
		h.clock.Step(2 * time.Second)
	}
	if s := h.c.stats(); s.workers != 0 || s.queued != 0 {
		t.Fatalf("stats = %+v, want no worker for members without metrics", s)
	}
}

func TestPeekNeverSchedules(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := mustPeek(t, h.c, "t"); len(got) != 2 || got["a"] != unknown {
			t.Fatalf("Peek = %v", got)
		}
		h.clock.Step(2 * time.Second)
	}
	if s := h.c.stats(); s.workers != 0 || s.pending != 0 {
		t.Fatalf("Peek scheduled work: %+v", s)
	}
}

func TestSnapshotIsDetachedAndChecksTier(t *testing.T) {
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	m := mustPeek(t, h.c, "t")
	m["a"] = freshFive
	delete(m, "b")
	if again := mustPeek(t, h.c, "t"); len(again) != 2 || again["a"] != unknown {
		t.Fatalf("mutating a snapshot changed the cache: %v", again)
	}
	if _, err := h.c.Snapshot("nope"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("Snapshot(unknown) = %v, want memberpoll.ErrUnknownTier", err)
	}
	if _, err := h.c.Peek("nope"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("Peek(unknown) = %v, want memberpoll.ErrUnknownTier", err)
	}
	h.c.Close()
	if _, err := h.c.Snapshot("nope"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("Snapshot(unknown) after Close = %v, want memberpoll.ErrUnknownTier", err)
	}
}

func TestReconfigure(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", "a", "b", "c"), tier("u", "a", "b")}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	mustSnapshot(t, h.c, "u")
	calls := map[string]*fakeCall{}
	for range 2 {
		c := h.coll.next(t)
		calls[c.member()] = c
	}
	// t/a and t/b run; t/c, u/a and u/b are queued.
	if _, ok := calls["a"]; !ok {
		t.Fatalf("first calls = %v, want t/a and t/b", calls)
	}
	if s := h.c.stats(); s.queued != 3 {
		t.Fatalf("stats = %+v, want 3 queued", s)
	}
	calls["a"].answer(telemetry(), nil)
	h.waitPublished(t, "a")
	keptA := h.c.member(t, "t", "a")
	// The freed worker takes t/c, the oldest queued refresh.
	if c := h.coll.next(t); c.member() != "c" {
		t.Fatalf("refresh of %s, want t/c", c.member())
	} else {
		calls["c"] = c
	}

	// Drop tier u and member t/c, change t/b's capacity, keep t/a.
	next := tier("t", "a", "b")
	next.Members[1].Capacity = 20
	if err := h.c.Reconfigure([]Tier{next}); err != nil {
		t.Fatal(err)
	}
	if s := h.c.stats(); s.queued != 0 {
		t.Fatalf("stats = %+v, want removed members' queue entries dropped", s)
	}
	for _, id := range []string{"b", "c"} {
		if calls[id].ctx.Err() == nil {
			t.Fatalf("running fetch of removed or changed t/%s was not cancelled", id)
		}
	}
	// Both cancelled fetches return and are discarded.
	done := map[string]bool{}
	for range 2 {
		select {
		case id := <-h.published:
			done[id] = true
		case <-time.After(10 * time.Second):
			t.Fatal("cancelled fetch never returned")
		}
	}
	if !done["b"] || !done["c"] {
		t.Fatalf("published %v, want b and c", done)
	}
	if h.c.member(t, "t", "a") != keptA {
		t.Fatal("unchanged member lost its state")
	}
	if got := mustPeek(t, h.c, "t"); got["a"] != freshFive || got["b"] != unknown || len(got) != 2 {
		t.Fatalf("after Reconfigure = %v", got)
	}
	if _, err := h.c.Peek("u"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("removed tier: %v", err)
	}
	// Only the changed member is due (a is fresh); removed members' queue
	// entries are gone.
	mustSnapshot(t, h.c, "t")
	c := h.coll.next(t)
	if c.target.MetricsURL != "http://127.0.0.1:9000/b" {
		t.Fatalf("refresh of %s, want t/b", c.target.MetricsURL)
	}
	c.answer(telemetry(), nil)
	h.waitPublished(t, "b")
	h.coll.idle(t)
	if s := h.c.stats(); s.queued != 0 || s.pending != 0 {
		t.Fatalf("stats = %+v, want no leftover queue entries", s)
	}
	want := scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 250000,
		RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}
	if got := mustPeek(t, h.c, "t"); got["b"] != want {
		t.Fatalf("b = %+v, want %+v (new capacity)", got["b"], want)
	}
	if err := h.c.Reconfigure(nil); err != nil {
		t.Fatal(err)
	}
	h.c.Close()
}

func TestReconfigureValidation(t *testing.T) {
	many := func(n int) []Tier {
		var out []Tier
		for i := 0; n > 0; i++ {
			k := min(n, bounds.MaxMembers)
			var ids []string
			for j := range k {
				ids = append(ids, fmt.Sprintf("m%d", j))
			}
			out = append(out, tier(fmt.Sprintf("t%d", i), ids...))
			n -= k
		}
		return out
	}
	mutate := func(f func(*Member)) []Tier {
		tr := tier("t", "a", "b")
		f(&tr.Members[1])
		return []Tier{tr}
	}
	tests := []struct {
		name    string
		tiers   []Tier
		wantErr error
	}{
		{name: "empty", tiers: nil},
		{name: "MaxMembers", tiers: many(bounds.MaxNodeMembers)},
		{name: "too many members", tiers: append(many(bounds.MaxNodeMembers-14), tier("last", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o")), wantErr: memberpoll.ErrTooManyMembers},
		{name: "one member", tiers: []Tier{tier("t", "a")}, wantErr: memberpoll.ErrTierSize},
		{name: "oversized tier", tiers: []Tier{{Key: "t", Members: append(many(16)[0].Members, Member{ID: "x", Capacity: 1})}}, wantErr: memberpoll.ErrTierSize},
		{name: "empty tier key", tiers: []Tier{tier("", "a", "b")}, wantErr: memberpoll.ErrInvalidTier},
		{name: "duplicate tier", tiers: []Tier{tier("t", "a", "b"), tier("t", "c", "d")}, wantErr: memberpoll.ErrDuplicateTier},
		{name: "duplicate member", tiers: []Tier{tier("t", "a", "a")}, wantErr: memberpoll.ErrDuplicateMember},
		{name: "same member id in two tiers", tiers: []Tier{tier("t", "a", "b"), tier("u", "a", "b")}},
		{name: "bad member id", tiers: mutate(func(m *Member) { m.ID = "Bad_ID" }), wantErr: memberpoll.ErrInvalidMember},
		{name: "zero capacity", tiers: mutate(func(m *Member) { m.Capacity = 0 }), wantErr: ErrInvalidCapacity},
		{name: "capacity too large", tiers: mutate(func(m *Member) { m.Capacity = bounds.MaxConcurrency + 1 }), wantErr: ErrInvalidCapacity},
		{name: "unknown engine", tiers: mutate(func(m *Member) { m.Engine = "triton" }), wantErr: ErrUnknownEngine},
		{name: "relative metrics URL", tiers: mutate(func(m *Member) { m.MetricsURL = "/metrics" }), wantErr: ErrInvalidMetricsURL},
		{name: "no engine, no URL", tiers: mutate(func(m *Member) { m.Engine, m.MetricsURL = "", "" })},
		{name: "named series without an engine", tiers: mutate(func(m *Member) { m.Engine, m.Series = "", Series{KVUsage: "kv"} })},
		{name: "invalid named series", tiers: mutate(func(m *Member) { m.Series = Series{Waiting: "kv{a=b}"} }), wantErr: ErrInvalidSeries},
		{name: "invalid named series without an engine", tiers: mutate(func(m *Member) { m.Engine, m.Series = "", Series{Running: "9"} }), wantErr: ErrInvalidSeries},
		{name: "named series with an unknown engine", tiers: mutate(func(m *Member) { m.Engine, m.Series = "triton", Series{Running: "kv"} }), wantErr: ErrUnknownEngine},
		{name: "named series, no URL", tiers: mutate(func(m *Member) { m.Engine, m.Series, m.MetricsURL = "", Series{Running: "kv"}, "" }), wantErr: ErrInvalidMetricsURL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{Clock: clocktesting.NewFakeClock(epoch), Collector: newFakeCollector()})
			defer c.Close()
			if err := c.Reconfigure([]Tier{tier("keep", "a", "b")}); err != nil {
				t.Fatal(err)
			}
			err := c.Reconfigure(tc.tiers)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Reconfigure = %v, want %v", err, tc.wantErr)
			}
			_, keepErr := c.Peek("keep")
			if tc.wantErr != nil && keepErr != nil {
				t.Fatal("a rejected configuration changed the cache")
			}
		})
	}
}

// TestCacheWithHTTPCollector runs the cache against real loopback servers:
// an oversized body is unknown, a 500 is failed, a good body is fresh.
func TestCacheWithHTTPCollector(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	good := string(readFixture(t, "vllm.txt"))
	big := strings.Repeat("# padding\n", MaxBodyBytes/10+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/good":
			_, _ = w.Write([]byte(good))
		case "/big":
			_, _ = w.Write([]byte(big))
		default:
			http.Error(w, "nope", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	clk := clocktesting.NewFakeClock(epoch)
	published := make(chan string, 8)
	c := New(Options{Clock: clk, Collector: HTTPCollector{Client: &http.Client{Transport: tr}},
		Sampled: func(id string) { published <- id }})
	defer c.Close()
	members := []Member{
		{ID: "good", MetricsURL: srv.URL + "/good", Engine: "vllm", Capacity: 32},
		{ID: "big", MetricsURL: srv.URL + "/big", Engine: "vllm", Capacity: 32},
		{ID: "err", MetricsURL: srv.URL + "/err", Engine: "vllm", Capacity: 32},
	}
	if err := c.Reconfigure([]Tier{{Key: "t", Members: members}}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, c, "t")
	for range 3 {
		<-published
	}
	got := mustPeek(t, c, "t")
	want := map[string]scheduler.Pressure{
		"good": {Freshness: scheduler.FreshnessFresh, PPM: 437500, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid},
		"big":  unknown,
		"err":  failed,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pressures = %+v, want %+v", got, want)
	}
	c.Close()
}

// TestNamedSeriesMember: a member that names its series without an engine
// is sampled with them, and a change of its series is a change of the
// member: it starts again without a sample.
func TestNamedSeriesMember(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	tr := tier("t", "a", "b")
	series := Series{Running: `srv_requests{state="running"}`, Waiting: `srv_requests{state="queued"}`}
	tr.Members[0].Engine, tr.Members[0].Series = "", series
	if err := h.c.Reconfigure([]Tier{tr}); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, h.c, "t")
	for range 2 {
		c := h.coll.next(t)
		if want := (Target{MetricsURL: "http://127.0.0.1:9000/" + c.member(), Engine: "vllm"}); c.member() == "a" {
			want.Engine, want.Series = "", series
			if c.target != want {
				t.Fatalf("target of a = %+v, want %+v", c.target, want)
			}
		} else if c.target != want {
			t.Fatalf("target of b = %+v, want %+v", c.target, want)
		}
		c.answer(telemetry(), nil)
		h.waitPublished(t, c.member())
	}
	if got := mustPeek(t, h.c, "t"); got["a"] != freshFive {
		t.Fatalf("a = %+v, want %+v", got["a"], freshFive)
	}

	tr.Members[0].Series.KVUsage = "srv_kv_cache_usage_ratio"
	if err := h.c.Reconfigure([]Tier{tr}); err != nil {
		t.Fatal(err)
	}
	if got := mustPeek(t, h.c, "t"); got["a"] != unknown || got["b"] != freshFive {
		t.Fatalf("after a series change = %+v, want a unknown and b kept", got)
	}
	h.c.Close()
}
