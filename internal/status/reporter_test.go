package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// failSafe bounds every wait on an event; it is a deadline for a broken
// test, never the way a test waits.
const failSafe = 20 * time.Second

// fakeView is a View the test sets.
type fakeView struct {
	mu      sync.Mutex
	reports []Report
}

func (v *fakeView) set(reports ...Report) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reports = reports
}

func (v *fakeView) Reports() []Report {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reports
}

// fakeWriter records writes ("node key gen phases [queue=waiting/max/oldest]")
// and fails while err is set.
type fakeWriter struct {
	mu     sync.Mutex
	writes []string
	err    error
}

func (w *fakeWriter) Write(_ context.Context, node string, r Report) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	line := fmt.Sprintf("%s %s %d %s", node, r.Key(), r.AppliedGeneration, phases(r))
	if q := r.Queue; q != nil {
		line += fmt.Sprintf(" queue=%d/%d/%ds", q.Waiting, q.MaxRequests, q.OldestWaitSeconds)
	}
	w.writes = append(w.writes, line)
	return nil
}

func (w *fakeWriter) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// take returns and clears the recorded writes.
func (w *fakeWriter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

func phases(r Report) string {
	s := ""
	for _, m := range r.Members {
		s += fmt.Sprintf("%s=%s/%t;", m.ID, m.Phase, m.Ready)
	}
	return s
}

func report(name string, gen int64, phase v1alpha1.MemberPhase) Report {
	return Report{Namespace: "ns", Name: name, AppliedGeneration: gen, Members: []v1alpha1.MemberStatus{
		{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting},
		{ID: "gpu1", Ready: true, Phase: phase},
	}}
}

// verifyNoLeaks checks, after the test's other cleanups (which stop the
// goroutines they own), that no goroutine started by the test is left.
func verifyNoLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// reporterHarness runs a Reporter on a fake clock; every comparison round
// is reported on rounds with its number of writes.
type reporterHarness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	view   *fakeView
	writer *fakeWriter
	rep    *Reporter
	rounds chan int
	cancel context.CancelFunc
	done   chan error
}

func startReporter(t *testing.T, reports ...Report) *reporterHarness {
	t.Helper()
	h := &reporterHarness{
		t:      t,
		clock:  clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		view:   &fakeView{},
		writer: &fakeWriter{},
		rounds: make(chan int, 64),
		done:   make(chan error, 1),
	}
	h.view.set(reports...)
	rep, err := NewReporter(Options{Writer: h.writer, Node: "gpu-node-1", View: h.view, Clock: h.clock,
		Compared: func(n int) { h.rounds <- n }})
	if err != nil {
		t.Fatal(err)
	}
	h.rep = rep
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- rep.Run(ctx) }()
	t.Cleanup(h.stop)
	h.round() // the immediate first comparison.
	return h
}

func (h *reporterHarness) stop() {
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run = %v", err)
		}
		h.done <- nil
	case <-time.After(failSafe):
		h.t.Fatal("Run did not return")
	}
}

// round waits for the next comparison and returns its number of writes.
func (h *reporterHarness) round() int {
	h.t.Helper()
	select {
	case n := <-h.rounds:
		return n
	case <-time.After(failSafe):
		h.t.Fatal("no comparison round")
	}
	return 0
}

// tick advances the clock by one interval and waits for the round.
func (h *reporterHarness) tick() int {
	h.t.Helper()
	h.clock.Step(DefaultInterval)
	return h.round()
}

func TestReporterWritesOnTransitionsOnly(t *testing.T) {
	verifyNoLeaks(t)
	h := startReporter(t, report("a", 1, v1alpha1.MemberAdmitting), report("b", 3, v1alpha1.MemberAdmitting))
	got := h.writer.take()
	want := []string{
		"gpu-node-1 ns/a 1 gpu0=Admitting/true;gpu1=Admitting/true;",
		"gpu-node-1 ns/b 3 gpu0=Admitting/true;gpu1=Admitting/true;",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first writes %q, want %q", got, want)
	}
	// Nothing changes: no write, however long it runs.
	for range 20 {
		if n := h.tick(); n != 0 {
			t.Fatalf("a round without a change wrote %d times", n)
		}
	}
	// One transition: one write.
	h.view.set(report("a", 1, v1alpha1.MemberDraining), report("b", 3, v1alpha1.MemberAdmitting))
	if n := h.tick(); n != 1 {
		t.Fatalf("a transition wrote %d times", n)
	}
	if got := h.writer.take(); len(got) != 1 || got[0] != "gpu-node-1 ns/a 1 gpu0=Admitting/true;gpu1=Draining/true;" {
		t.Fatalf("writes %q", got)
	}
}

// TestReporterCoalescesWithinTheRateLimit proves at most one write per tier
// per second: transitions inside the window are coalesced into one write of
// the latest report when the window opens.
func TestReporterCoalescesWithinTheRateLimit(t *testing.T) {
	verifyNoLeaks(t)
	h := startReporter(t, report("a", 1, v1alpha1.MemberAdmitting), report("b", 1, v1alpha1.MemberAdmitting))
	h.writer.take()

	h.view.set(report("a", 1, v1alpha1.MemberDraining), report("b", 1, v1alpha1.MemberAdmitting))
	h.tick() // t=0.25 s: 0.25 s after the first write, inside the window.
	h.view.set(report("a", 1, v1alpha1.MemberDrained), report("b", 1, v1alpha1.MemberDraining))
	h.tick() // t=0.5 s
	if got := h.writer.take(); len(got) != 0 {
		t.Fatalf("wrote %q inside the rate limit window", got)
	}
	h.tick() // t=0.75 s
	// t=1 s: the window opens for both tiers.
	if n := h.tick(); n != 2 {
		t.Fatalf("%d writes when the window opened, want 2", n)
	}
	got := h.writer.take()
	want := []string{
		"gpu-node-1 ns/a 1 gpu0=Admitting/true;gpu1=Drained/true;",
		"gpu-node-1 ns/b 1 gpu0=Admitting/true;gpu1=Draining/true;",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("writes %q, want the latest reports %q", got, want)
	}

	// Tiers are limited independently: a changes again at t=1.25 s and waits
	// until t=2 s; b, written at t=1 s too, is unaffected meanwhile.
	h.view.set(report("a", 2, v1alpha1.MemberDrained), report("b", 1, v1alpha1.MemberDraining))
	for i := range 3 {
		if n := h.tick(); n != 0 {
			t.Fatalf("tick %d wrote %d times inside a's window", i, n)
		}
	}
	if n := h.tick(); n != 1 {
		t.Fatalf("%d writes at t=2 s, want 1", n)
	}
}

func TestReporterNotify(t *testing.T) {
	verifyNoLeaks(t)
	h := startReporter(t)
	h.view.set(report("a", 1, v1alpha1.MemberAdmitting))
	h.rep.Notify()
	if n := h.round(); n != 1 {
		t.Fatalf("Notify round wrote %d times, want 1 (no clock step needed)", n)
	}
}

func TestReporterBacksOffOnFailures(t *testing.T) {
	verifyNoLeaks(t)
	h := startReporter(t)
	h.writer.setErr(errors.New("apiserver down"))
	h.view.set(report("a", 1, v1alpha1.MemberAdmitting), report("b", 1, v1alpha1.MemberAdmitting))
	h.rep.Notify()
	if n := h.round(); n != 1 {
		t.Fatalf("first failing round attempted %d writes, want 1 (the round stops at the failure)", n)
	}
	// Backoff of 1 s: no attempt before it ends.
	for range 3 {
		if n := h.tick(); n != 0 {
			t.Fatalf("attempted %d writes during the backoff", n)
		}
	}
	if n := h.tick(); n != 1 { // t=1 s: retry, fails again; backoff 2 s.
		t.Fatalf("retry attempted %d writes", n)
	}
	for range 7 {
		if n := h.tick(); n != 0 {
			t.Fatalf("attempted %d writes during the second backoff", n)
		}
	}
	h.writer.setErr(nil)
	if n := h.tick(); n != 2 { // t=3 s: both tiers.
		t.Fatalf("recovery round attempted %d writes, want 2", n)
	}
	if got := h.writer.take(); len(got) != 2 {
		t.Fatalf("writes %q", got)
	}
	if n := h.tick(); n != 0 {
		t.Fatalf("wrote %d times after recovery without a change", n)
	}
}

func TestReporterGoneAndReturningTiers(t *testing.T) {
	verifyNoLeaks(t)
	h := startReporter(t)
	h.writer.setErr(fmt.Errorf("%w: ns/a", ErrTierGone))
	h.view.set(report("a", 1, v1alpha1.MemberAdmitting))
	h.rep.Notify()
	if n := h.round(); n != 1 {
		t.Fatalf("attempted %d writes", n)
	}
	// A gone tier is not retried while its report stays the same.
	h.writer.setErr(nil)
	for range 8 {
		if n := h.tick(); n != 0 {
			t.Fatalf("retried a gone tier %d times", n)
		}
	}
	// A tier that leaves the view and comes back is written again.
	h.view.set()
	h.tick()
	h.view.set(report("a", 1, v1alpha1.MemberAdmitting))
	if n := h.tick(); n != 1 {
		t.Fatalf("returning tier: %d writes, want 1", n)
	}
}

// queued returns report("a", 1, phase) with a queue of 64 holding waiting
// requests, the oldest waiting oldest seconds.
func queued(phase v1alpha1.MemberPhase, waiting, oldest int32) Report {
	r := report("a", 1, phase)
	r.Queue = &v1alpha1.QueueStatus{MaxRequests: 64, Waiting: waiting, OldestWaitSeconds: oldest}
	return r
}

// TestReporterWritesQueueLoadAtMostEveryTenSeconds proves a change of the
// queue's load alone writes at most once per QueueStatusInterval, while a
// member's transition still writes at once (within MinWriteInterval) and
// carries the current queue along, and a queue that changes its bound or
// goes away is a configuration change, written at once.
func TestReporterWritesQueueLoadAtMostEveryTenSeconds(t *testing.T) {
	verifyNoLeaks(t)
	h := startReporter(t, queued(v1alpha1.MemberAdmitting, 0, 0))
	const a = "gpu-node-1 ns/a 1 gpu0=Admitting/true;"
	if got := h.writer.take(); fmt.Sprint(got) != fmt.Sprint([]string{a + "gpu1=Admitting/true; queue=0/64/0s"}) {
		t.Fatalf("first write %q", got)
	}
	ticks := int(QueueStatusInterval / DefaultInterval)

	// Requests wait and the oldest wait grows every second: nothing is
	// written before ten seconds, one write of the latest load at ten.
	for i := 1; i < ticks; i++ {
		h.view.set(queued(v1alpha1.MemberAdmitting, 3, int32(i/4))) //nolint:gosec // i < 40.
		if n := h.tick(); n != 0 {
			t.Fatalf("t=%v: a queue-only change wrote %d times", time.Duration(i)*DefaultInterval, n)
		}
	}
	h.view.set(queued(v1alpha1.MemberAdmitting, 4, 9))
	if n := h.tick(); n != 1 {
		t.Fatalf("t=10s: %d writes, want 1", n)
	}
	if got := h.writer.take(); len(got) != 1 || got[0] != a+"gpu1=Admitting/true; queue=4/64/9s" {
		t.Fatalf("t=10s: writes %q", got)
	}

	// t=12 s: the queue changed at 10.25 s (not written: inside the ten
	// seconds), then a member drains: written at once, with the queue.
	h.view.set(queued(v1alpha1.MemberAdmitting, 5, 10))
	for range 7 {
		if n := h.tick(); n != 0 {
			t.Fatalf("a queue-only change wrote %d times", n)
		}
	}
	h.view.set(queued(v1alpha1.MemberDraining, 6, 11))
	if n := h.tick(); n != 1 {
		t.Fatalf("a member's transition wrote %d times, want 1", n)
	}
	if got := h.writer.take(); len(got) != 1 || got[0] != a+"gpu1=Draining/true; queue=6/64/11s" {
		t.Fatalf("transition writes %q", got)
	}

	// The queue's load changes again: the ten seconds count from that
	// write, so nothing before t=22 s.
	h.view.set(queued(v1alpha1.MemberDraining, 0, 0))
	for range ticks - 1 {
		if n := h.tick(); n != 0 {
			t.Fatalf("a queue-only change wrote %d times within ten seconds of the last write", n)
		}
	}
	if n := h.tick(); n != 1 {
		t.Fatalf("t=22s: %d writes, want 1", n)
	}
	h.writer.take()

	// A new bound (a new spec.queue applied) and a queue removed are
	// written within MinWriteInterval.
	r := queued(v1alpha1.MemberDraining, 0, 0)
	r.Queue.MaxRequests = 128
	h.view.set(r)
	for range 3 {
		h.tick()
	}
	if n := h.tick(); n != 1 {
		t.Fatalf("a new queue bound: %d writes at t+1s, want 1", n)
	}
	r.Queue = nil
	h.view.set(r)
	for range 3 {
		h.tick()
	}
	if n := h.tick(); n != 1 {
		t.Fatalf("a removed queue: %d writes at t+1s, want 1", n)
	}
	if got := h.writer.take(); fmt.Sprint(got) != fmt.Sprint([]string{a + "gpu1=Draining/true; queue=0/128/0s", a + "gpu1=Draining/true;"}) {
		t.Fatalf("writes %q", got)
	}
}

func TestNewReporterOptions(t *testing.T) {
	for _, opts := range []Options{
		{},
		{Writer: &fakeWriter{}, View: &fakeView{}},
		{Writer: &fakeWriter{}, Node: "n"},
		{View: &fakeView{}, Node: "n"},
	} {
		if _, err := NewReporter(opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("NewReporter(%+v) = %v, want ErrInvalidOptions", opts, err)
		}
	}
}
