package readiness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/internal/memberpoll"
)

// probeCall is one Probe call waiting for the test to answer it.
type probeCall struct {
	ctx    context.Context
	target Target
	reply  chan error
}

// member returns the member id encoded in the call's host path.
func (p *probeCall) member() string {
	rest := strings.TrimSuffix(p.target.ModelsURL, ModelsPath)
	return rest[strings.LastIndexByte(rest, '/')+1:]
}

// fakeProber hands every Probe call to the test and blocks until it is
// answered or its context ends.
type fakeProber struct {
	calls chan *probeCall
	n     atomic.Int64
}

func (f *fakeProber) Probe(ctx context.Context, target Target) error {
	f.n.Add(1)
	c := &probeCall{ctx: ctx, target: target, reply: make(chan error, 1)}
	f.calls <- c
	select {
	case err := <-c.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeProber) next(t *testing.T) *probeCall {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no Probe call")
		return nil
	}
}

// nextN returns the next n calls keyed by member id.
func (f *fakeProber) nextN(t *testing.T, n int) map[string]*probeCall {
	t.Helper()
	out := map[string]*probeCall{}
	for range n {
		c := f.next(t)
		if out[c.member()] != nil {
			t.Fatalf("two concurrent probes of %s", c.member())
		}
		out[c.member()] = c
	}
	return out
}

func (f *fakeProber) idle(t *testing.T) {
	t.Helper()
	select {
	case c := <-f.calls:
		t.Fatalf("unexpected probe of %s", c.member())
	default:
	}
}

const interval = 2 * time.Second

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	c      *Cache
	clock  *clocktesting.FakeClock
	prober *fakeProber
	probed chan string
	waits  chan string
	// uncounted, once set, keeps completed probes off probed, for a test
	// that runs more probes than the channel holds.
	uncounted atomic.Bool
	cancel    context.CancelFunc
	runErr    chan error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		clock:  clocktesting.NewFakeClock(epoch),
		prober: &fakeProber{calls: make(chan *probeCall, bounds.MaxNodeMembers)},
		probed: make(chan string, bounds.MaxNodeMembers),
		waits:  make(chan string, bounds.MaxNodeMembers),
	}
	h.c = New(Options{Clock: h.clock, Prober: h.prober, Interval: interval,
		Probed: func(id string) {
			if !h.uncounted.Load() {
				h.probed <- id
			}
		},
		ProbeNowWaiting: func(id string) { h.waits <- id }})
	return h
}

// run starts Run on its own goroutine; stop ends it and waits for it.
func (h *harness) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.runErr = make(chan error, 1)
	go func() { h.runErr <- h.c.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
}

func (h *harness) stop(t *testing.T) {
	t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.runErr:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

// waitProbeNow waits until a ProbeNow call for id is waiting for its probe.
func (h *harness) waitProbeNow(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-h.waits:
		if got != id {
			t.Fatalf("ProbeNow waits for %s, want %s", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("ProbeNow for %s never waited", id)
	}
}

func (h *harness) waitProbed(t *testing.T, ids ...string) {
	t.Helper()
	want := map[string]int{}
	for _, id := range ids {
		want[id]++
	}
	for range ids {
		select {
		case id := <-h.probed:
			if want[id] == 0 {
				t.Fatalf("probe of %s completed, want %v", id, ids)
			}
			want[id]--
		case <-time.After(10 * time.Second):
			t.Fatalf("probes of %v never completed", ids)
		}
	}
}

func tier(key, model string, ids ...string) Tier {
	t := Tier{Key: key, ServedModel: model}
	for i, id := range ids {
		t.Members = append(t.Members, Member{ID: id, Endpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", 8001+i, id)})
	}
	return t
}

func mustReady(t *testing.T, c *Cache, key string) map[string]bool {
	t.Helper()
	m, err := c.Ready(key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReadyFollowsProbes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a", "b")}); err != nil {
		t.Fatal(err)
	}
	if got := mustReady(t, h.c, "t"); len(got) != 2 || got["a"] || got["b"] {
		t.Fatalf("before Run = %v, want both not ready", got)
	}
	h.prober.idle(t)
	h.run(t)
	calls := h.prober.nextN(t, 2)
	for id, c := range calls {
		if c.target.ServedModel != served || c.target.ModelsURL != "http://127.0.0.1:"+map[string]string{"a": "8001", "b": "8002"}[id]+"/"+id+ModelsPath {
			t.Fatalf("probe target %+v", c.target)
		}
	}
	calls["a"].reply <- nil
	calls["b"].reply <- ErrModelNotServed
	h.waitProbed(t, "a", "b")
	if got := mustReady(t, h.c, "t"); !got["a"] || got["b"] {
		t.Fatalf("Ready = %v, want a only", got)
	}
	h.prober.idle(t)

	// One tick, one probe each.
	h.clock.Step(interval)
	calls = h.prober.nextN(t, 2)
	calls["a"].reply <- ErrMalformedResponse
	calls["b"].reply <- nil
	h.waitProbed(t, "a", "b")
	if got := mustReady(t, h.c, "t"); got["a"] || !got["b"] {
		t.Fatalf("Ready = %v, want b only", got)
	}
	h.prober.idle(t)
	if n := h.prober.n.Load(); n != 4 {
		t.Fatalf("%d probes, want 4", n)
	}
	h.clock.SetTime(epoch) // behind the latest result
	if got := mustReady(t, h.c, "t"); got["b"] {
		t.Fatalf("result from the future = %v, want not ready", got)
	}
	h.stop(t)
}

func TestStaleAndLateResults(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	h.prober.next(t).reply <- nil
	h.waitProbed(t, "a")

	h.clock.Step(interval)
	held := h.prober.next(t) // the second probe hangs
	h.clock.Step(StaleIntervals*interval - interval)
	if got := mustReady(t, h.c, "t"); !got["a"] {
		t.Fatalf("result exactly %d intervals old = %v, want ready", StaleIntervals, got)
	}
	h.clock.Step(time.Millisecond)
	if got := mustReady(t, h.c, "t"); got["a"] {
		t.Fatalf("result older than %d intervals = %v, want not ready", StaleIntervals, got)
	}
	// The hung probe finally succeeds, 4 s after it started: too late.
	held.reply <- nil
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); got["a"] {
		t.Fatalf("late success = %v, want not ready", got)
	}
	// A tick arrived meanwhile; the next prompt probe restores readiness.
	h.prober.next(t).reply <- nil
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); !got["a"] {
		t.Fatalf("after prompt probe = %v, want ready", got)
	}
	h.stop(t)
}

func TestProbeNowReadmission(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a", "b")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.c.ProbeNow(ctx, "t", "a"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("ProbeNow before Run = %v, want ErrNotRunning", err)
	}
	h.run(t)
	calls := h.prober.nextN(t, 2)
	calls["a"].reply <- nil
	calls["b"].reply <- ErrModelNotServed
	h.waitProbed(t, "a", "b")

	// Readmission of b: the engine now serves the model. No tick is needed.
	type result struct {
		ready bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ready, err := h.c.ProbeNow(ctx, "t", "b")
		done <- result{ready, err}
	}()
	h.waitProbeNow(t, "b")
	c := h.prober.next(t)
	if c.member() != "b" {
		t.Fatalf("ProbeNow probed %s", c.member())
	}
	c.reply <- nil
	if r := <-done; !r.ready || r.err != nil {
		t.Fatalf("ProbeNow = %v, %v; want ready", r.ready, r.err)
	}
	h.waitProbed(t, "b")
	if got := mustReady(t, h.c, "t"); !got["b"] {
		t.Fatalf("Ready after readmission = %v", got)
	}

	// A ProbeNow during a running probe waits for a probe that starts after
	// it, not for the one in flight.
	h.clock.Step(interval)
	calls = h.prober.nextN(t, 2)
	calls["a"].reply <- nil
	h.waitProbed(t, "a")
	go func() {
		ready, err := h.c.ProbeNow(ctx, "t", "b")
		done <- result{ready, err}
	}()
	h.waitProbeNow(t, "b")
	calls["b"].reply <- nil // in flight before ProbeNow: does not answer it
	h.waitProbed(t, "b")
	select {
	case r := <-done:
		t.Fatalf("ProbeNow returned %v before its own probe", r)
	default:
	}
	c = h.prober.next(t)
	c.reply <- ErrModelNotServed
	if r := <-done; r.ready || r.err != nil {
		t.Fatalf("ProbeNow = %v, %v; want not ready", r.ready, r.err)
	}
	h.waitProbed(t, "b")

	// Errors.
	if _, err := h.c.ProbeNow(ctx, "nope", "a"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("unknown tier: %v", err)
	}
	if _, err := h.c.ProbeNow(ctx, "t", "zz"); !errors.Is(err, memberpoll.ErrUnknownMember) {
		t.Fatalf("unknown member: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := h.c.ProbeNow(cctx, "t", "a")
		done <- result{err: err}
	}()
	h.waitProbeNow(t, "a")
	c = h.prober.next(t)
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled ProbeNow = %v", r.err)
	}
	c.reply <- nil
	h.waitProbed(t, "a")
	h.stop(t)
	if _, err := h.c.ProbeNow(ctx, "t", "a"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("ProbeNow after Run = %v, want ErrNotRunning", err)
	}
}

func TestProbeNowWaiterReleasedByRemovalAndClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a", "b")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	calls := h.prober.nextN(t, 2) // both probes hang
	done := make(chan error, 2)
	go func() {
		_, err := h.c.ProbeNow(context.Background(), "t", "a")
		done <- err
	}()
	go func() {
		_, err := h.c.ProbeNow(context.Background(), "t", "b")
		done <- err
	}()
	for range 2 {
		<-h.waits
	}
	// Remove a, keep b (same endpoint), add c.
	orig := tier("t", served, "a", "b")
	next := Tier{Key: "t", ServedModel: served, Members: []Member{orig.Members[1], {ID: "c", Endpoint: "http://127.0.0.1:9/c"}}}
	if err := h.c.Reconfigure([]Tier{next}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, memberpoll.ErrUnknownMember) {
		t.Fatalf("waiter on removed member = %v", err)
	}
	if calls["a"].ctx.Err() == nil {
		t.Fatal("removed member's probe was not cancelled")
	}
	h.prober.next(t) // c's first probe
	h.c.Close()
	if err := <-done; !errors.Is(err, memberpoll.ErrClosed) {
		t.Fatalf("waiter on closed cache = %v", err)
	}
	h.stop(t)
}

func TestReconfigureWhileRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a", "b"), tier("u", "other", "x")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	calls := h.prober.nextN(t, 3)
	for _, c := range calls {
		c.reply <- nil
	}
	h.waitProbed(t, "a", "b", "x")

	// Tier t changes its served model; tier u is removed; tier v is added.
	next := []Tier{tier("t", "new-model", "a", "b"), tier("v", "m", "y")}
	if err := h.c.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if got := mustReady(t, h.c, "t"); got["a"] || got["b"] {
		t.Fatalf("after served model change = %v, want not ready until probed", got)
	}
	if _, err := h.c.Ready("u"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("removed tier: %v", err)
	}
	calls = h.prober.nextN(t, 3)
	if calls["a"].target.ServedModel != "new-model" || calls["y"].target.ServedModel != "m" {
		t.Fatalf("probe targets after Reconfigure: %+v %+v", calls["a"].target, calls["y"].target)
	}
	for _, c := range calls {
		c.reply <- nil
	}
	h.waitProbed(t, "a", "b", "y")
	if got := mustReady(t, h.c, "t"); !got["a"] || !got["b"] {
		t.Fatalf("Ready = %v", got)
	}

	// An unchanged configuration keeps results and probers.
	if err := h.c.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	h.prober.idle(t)
	if got := mustReady(t, h.c, "v"); !got["y"] {
		t.Fatalf("unchanged member lost its result: %v", got)
	}
	// Removing everything stops every prober; goleak checks the rest.
	if err := h.c.Reconfigure(nil); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(10 * interval)
	h.prober.idle(t)
	h.stop(t)
}

func TestCloseStopsRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a", "b")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	calls := h.prober.nextN(t, 2)
	calls["a"].reply <- nil // b hangs
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); !got["a"] {
		t.Fatalf("Ready = %v", got)
	}
	h.c.Close()
	h.c.Close()
	select {
	case err := <-h.runErr:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		h.cancel()
		h.cancel = nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if calls["b"].ctx.Err() == nil {
		t.Fatal("Close did not cancel the running probe")
	}
	if got := mustReady(t, h.c, "t"); got["a"] || got["b"] {
		t.Fatalf("Ready after Close = %v, want none", got)
	}
	if err := h.c.Run(context.Background()); !errors.Is(err, memberpoll.ErrClosed) {
		t.Fatalf("Run after Close = %v", err)
	}
	if err := h.c.Reconfigure(nil); !errors.Is(err, memberpoll.ErrClosed) {
		t.Fatalf("Reconfigure after Close = %v", err)
	}
	if _, err := h.c.ProbeNow(context.Background(), "t", "a"); !errors.Is(err, memberpoll.ErrClosed) {
		t.Fatalf("ProbeNow after Close = %v", err)
	}
}

func TestRunTwice(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	h.prober.next(t) // Run is probing
	if err := h.c.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v", err)
	}
	h.stop(t)
}

func TestReadyIsDetached(t *testing.T) {
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	m := mustReady(t, h.c, "t")
	m["a"] = true
	m["zz"] = true
	if again := mustReady(t, h.c, "t"); len(again) != 1 || again["a"] {
		t.Fatalf("mutating a result changed the cache: %v", again)
	}
	if _, err := h.c.Ready("nope"); !errors.Is(err, memberpoll.ErrUnknownTier) {
		t.Fatalf("unknown tier: %v", err)
	}
}

func TestReconfigureValidation(t *testing.T) {
	manyTiers := func(n int) []Tier {
		var out []Tier
		for i := range (n + bounds.MaxMembers - 1) / bounds.MaxMembers {
			var ids []string
			for j := range min(bounds.MaxMembers, n-i*bounds.MaxMembers) {
				ids = append(ids, fmt.Sprintf("m%d", j))
			}
			out = append(out, tier(fmt.Sprintf("t%d", i), served, ids...))
		}
		return out
	}
	seventeen := tier("t", served)
	for i := range bounds.MaxMembers + 1 {
		seventeen.Members = append(seventeen.Members, Member{ID: fmt.Sprintf("m%d", i), Endpoint: "http://127.0.0.1:1"})
	}
	withMember := func(m Member) []Tier {
		tr := tier("t", served, "a")
		tr.Members = append(tr.Members, m)
		return []Tier{tr}
	}
	tests := []struct {
		name    string
		tiers   []Tier
		wantErr error
	}{
		{name: "direct tier", tiers: []Tier{tier("t", served, "a")}},
		{name: "MaxMembers", tiers: manyTiers(bounds.MaxNodeMembers)},
		{name: "too many members", tiers: manyTiers(bounds.MaxNodeMembers + 1), wantErr: memberpoll.ErrTooManyMembers},
		{name: "no members", tiers: []Tier{tier("t", served)}, wantErr: memberpoll.ErrTierSize},
		{name: "too many in one tier", tiers: []Tier{seventeen}, wantErr: memberpoll.ErrTierSize},
		{name: "empty key", tiers: []Tier{tier("", served, "a")}, wantErr: memberpoll.ErrInvalidTier},
		{name: "duplicate key", tiers: []Tier{tier("t", served, "a"), tier("t", served, "b")}, wantErr: memberpoll.ErrDuplicateTier},
		{name: "empty served model", tiers: []Tier{tier("t", "", "a")}, wantErr: ErrInvalidServedModel},
		{name: "duplicate member", tiers: withMember(Member{ID: "a", Endpoint: "http://127.0.0.1:2"}), wantErr: memberpoll.ErrDuplicateMember},
		{name: "bad member id", tiers: withMember(Member{ID: "-a", Endpoint: "http://127.0.0.1:2"}), wantErr: memberpoll.ErrInvalidMember},
		{name: "long member id", tiers: withMember(Member{ID: strings.Repeat("a", 33), Endpoint: "http://127.0.0.1:2"}), wantErr: memberpoll.ErrInvalidMember},
		{name: "bad endpoint", tiers: withMember(Member{ID: "b", Endpoint: "127.0.0.1:2"}), wantErr: ErrInvalidEndpoint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{Clock: clocktesting.NewFakeClock(epoch), Prober: &fakeProber{}})
			defer c.Close()
			if err := c.Reconfigure([]Tier{tier("keep", served, "a")}); err != nil {
				t.Fatal(err)
			}
			err := c.Reconfigure(tc.tiers)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Reconfigure = %v, want %v", err, tc.wantErr)
			}
			if _, keepErr := c.Ready("keep"); tc.wantErr != nil && keepErr != nil {
				t.Fatal("a rejected configuration changed the cache")
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := New(Options{})
	if c.interval != DefaultInterval {
		t.Fatalf("interval = %v, want %v", c.interval, DefaultInterval)
	}
	if _, ok := c.prober.(HTTPProber); !ok {
		t.Fatalf("prober = %T, want HTTPProber", c.prober)
	}
	c.Close()
}

// TestProbedSeesPublishedResult: Options.Probed is called after each probe,
// and by then Ready reads the probe's result, so a caller admitting waiting
// requests from it sees the member that just turned ready.
func TestProbedSeesPublishedResult(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	seen := make(chan bool, 1)
	h.c = New(Options{Clock: h.clock, Prober: h.prober, Interval: interval, Probed: func(string) {
		m, err := h.c.Ready("t")
		seen <- err == nil && m["a"]
	}})
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	h.prober.next(t).reply <- nil
	select {
	case ready := <-seen:
		if !ready {
			t.Fatal("Probed ran before Ready read the passing probe")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Probed was never called")
	}
	h.stop(t)
}
