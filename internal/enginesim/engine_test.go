package enginesim

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func newTestEngine(t *testing.T, mutate func(*Config)) (*Engine, *clocktesting.FakeClock) {
	t.Helper()
	cfg := zeroLatencyConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	fc := clocktesting.NewFakeClock(epoch)
	e, err := newEngine(cfg, fc)
	if err != nil {
		t.Fatalf("newEngine: %v", err)
	}
	return e, fc
}

func awaitEngine(t *testing.T, e *Engine, what string, cond func(State) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	if err := e.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v (state %+v)", what, err, e.State())
	}
}

// expectTimer checks that the one timer the engine just armed fires after
// exactly d: stepping d-1 leaves it pending and one more nanosecond fires
// it. FakeClock.Step removes fired timers synchronously, so Waiters is exact.
func expectTimer(t *testing.T, e *Engine, fc *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	awaitEngine(t, e, "a clock wait", func(s State) bool { return s.ClockWaits == 1 })
	if got := fc.Waiters(); got != 1 {
		t.Fatalf("fake clock has %d waiters, want 1", got)
	}
	fc.Step(d - 1)
	if fc.Waiters() != 1 {
		t.Fatalf("timer fired before %v", d)
	}
	fc.Step(1)
	if fc.Waiters() != 0 {
		t.Fatalf("timer did not fire at %v", d)
	}
}

func waitDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	case <-time.After(failsafe):
		t.Fatal("operation did not finish")
	}
}

func TestLatencyGrowsWithRunningBatch(t *testing.T) {
	const (
		ttftBase, ttftPer = 100 * time.Millisecond, 10 * time.Millisecond
		itlBase, itlPer   = 20 * time.Millisecond, 5 * time.Millisecond
		hidden            = 2
	)
	e, fc := newTestEngine(t, func(c *Config) {
		c.MaxNumSeqs = 8
		c.HiddenLoad = hidden
		c.TTFTBase, c.TTFTPerSeq = ttftBase, ttftPer
		c.ITLBase, c.ITLPerSeq = itlBase, itlPer
	})
	ctx := context.Background()
	var held []sequence
	var ttftSum time.Duration
	for j := 1; j <= 3; j++ {
		s, err := e.admit(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
		running := hidden + j
		wantTTFT, wantITL := ttftBase+ttftPer*time.Duration(running), itlBase+itlPer*time.Duration(running)
		if gotTTFT, gotITL := e.cfg.Latency(running); gotTTFT != wantTTFT || gotITL != wantITL {
			t.Fatalf("Latency(%d) = %v, %v; want %v, %v", running, gotTTFT, gotITL, wantTTFT, wantITL)
		}

		seq := &held[len(held)-1]
		done := make(chan error, 1)
		go func() { done <- seq.prefill(ctx, true) }()
		expectTimer(t, e, fc, wantTTFT)
		waitDone(t, done)
		ttftSum += wantTTFT

		go func() { done <- seq.decode(ctx, 1) }()
		expectTimer(t, e, fc, wantITL)
		waitDone(t, done)
		if seq.generated != 2 {
			t.Fatalf("generated = %d, want 2", seq.generated)
		}
	}
	m := e.metrics()
	if m.ttft.count != 3 || time.Duration(m.ttft.sum*float64(time.Second)).Round(time.Microsecond) != ttftSum {
		t.Fatalf("ttft histogram count %d sum %v, want 3 and %v", m.ttft.count, m.ttft.sum, ttftSum)
	}
	if m.generationTokens != 6 || m.promptTokens != 30 {
		t.Fatalf("tokens: prompt %d generation %d, want 30 and 6", m.promptTokens, m.generationTokens)
	}
	for i := range held {
		held[i].release()
	}
	if s := e.State(); s.Running != 0 || s.ClockWaits != 0 {
		t.Fatalf("state after release = %+v", s)
	}
}

func TestTTFTIncludesQueueing(t *testing.T) {
	e, fc := newTestEngine(t, func(c *Config) {
		c.MaxNumSeqs = 1
		c.TTFTBase = 100 * time.Millisecond
	})
	ctx := context.Background()
	first, err := e.admit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	type admitted struct {
		s   sequence
		err error
	}
	second := make(chan admitted, 1)
	go func() {
		s, err := e.admit(ctx, 1)
		second <- admitted{s, err}
	}()
	awaitEngine(t, e, "a waiter", func(s State) bool { return s.Waiting == 1 })
	fc.Step(time.Second) // the second request waits one second in the queue
	first.release()
	got := <-second
	if got.err != nil {
		t.Fatal(got.err)
	}
	done := make(chan error, 1)
	go func() { done <- got.s.prefill(ctx, true) }()
	expectTimer(t, e, fc, 100*time.Millisecond)
	waitDone(t, done)
	got.s.release()
	if m := e.metrics(); m.ttft.count != 1 || m.ttft.sum != (1100*time.Millisecond).Seconds() {
		t.Fatalf("ttft count %d sum %v, want 1 and 1.1", m.ttft.count, m.ttft.sum)
	}
}

func TestQueueIsFIFOAndCancellable(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) {
		c.MaxNumSeqs = 2
		c.HiddenLoad = 1 // one free slot
		c.HiddenLoadTokens = 7
	})
	ctx := context.Background()
	a, err := e.admit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	seqs := make(chan sequence, 3)
	start := func(ctx context.Context, name string, waiting int) {
		go func() {
			s, err := e.admit(ctx, 1)
			if err != nil {
				order <- name + " cancelled"
				return
			}
			order <- name
			seqs <- s
		}()
		awaitEngine(t, e, name+" queued", func(s State) bool { return s.Waiting == waiting })
	}
	dCtx, cancelD := context.WithCancel(ctx)
	start(ctx, "b", 1)
	start(ctx, "c", 2)
	start(dCtx, "d", 3)
	if s := e.State(); s.Running != 1 || s.HiddenRunning != 1 || s.Waiting != 3 {
		t.Fatalf("state = %+v, want running 1 hidden 1 waiting 3", s)
	}

	a.release()
	if got := <-order; got != "b" {
		t.Fatalf("first admitted = %s, want b", got)
	}
	b := <-seqs
	if s := e.State(); s.Running != 1 || s.Waiting != 2 {
		t.Fatalf("state = %+v, want running 1 waiting 2", s)
	}
	cancelD()
	if got := <-order; got != "d cancelled" {
		t.Fatalf("got %s, want d cancelled", got)
	}
	if s := e.State(); s.Waiting != 1 {
		t.Fatalf("waiting = %d after cancel, want 1", s.Waiting)
	}
	b.release()
	if got := <-order; got != "c" {
		t.Fatalf("second admitted = %s, want c", got)
	}
	c := <-seqs
	c.release()
	c.release() // idempotent
	s := e.State()
	if s.Running != 0 || s.Waiting != 0 || s.KVTokens != 7 || s.MaxRunning != 1 {
		t.Fatalf("idle state = %+v, want running 0 waiting 0 kv 7 (hidden) max running 1", s)
	}
}

func TestKVUsageFromTokensInFlight(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) {
		c.MaxNumSeqs = 4
		c.KVCapacityTokens = 1000
		c.HiddenLoad = 1
		c.HiddenLoadTokens = 100
	})
	ctx := context.Background()
	check := func(wantTokens int64, wantUsage float64) {
		t.Helper()
		s := e.State()
		if s.KVTokens != wantTokens || s.KVUsage() != wantUsage {
			t.Fatalf("kv tokens %d usage %v, want %d and %v", s.KVTokens, s.KVUsage(), wantTokens, wantUsage)
		}
	}
	check(100, 0.1)
	a, err := e.admit(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	check(300, 0.3)
	if err := a.prefill(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := a.decode(ctx, 9); err != nil {
		t.Fatal(err)
	}
	check(310, 0.31)
	b, err := e.admit(ctx, 800)
	if err != nil {
		t.Fatal(err)
	}
	check(1110, 1) // capped
	a.release()
	check(900, 0.9)
	b.release()
	check(100, 0.1)
}

func TestAdmitCancelledWhileQueuedHoldsNothing(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) { c.MaxNumSeqs = 1 })
	a, err := e.admit(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := e.admit(ctx, 5)
		errc <- err
	}()
	awaitEngine(t, e, "queued", func(s State) bool { return s.Waiting == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("admit error = %v, want context.Canceled", err)
	}
	a.release()
	if s := e.State(); s.Running != 0 || s.Waiting != 0 || s.KVTokens != 0 {
		t.Fatalf("state = %+v, want idle", s)
	}
}

func TestSleepCancelled(t *testing.T) {
	e, fc := newTestEngine(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.sleep(ctx, time.Hour) }()
	awaitEngine(t, e, "sleeping", func(s State) bool { return s.ClockWaits == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep error = %v, want context.Canceled", err)
	}
	if fc.Waiters() != 0 || e.State().ClockWaits != 0 {
		t.Fatal("the cancelled timer is still pending")
	}
}

func TestAwaitReturnsContextError(t *testing.T) {
	e, _ := newTestEngine(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := e.Await(ctx, func(State) bool { return false })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Await = %v, want context.Canceled", err)
	}
	if err := e.Await(context.Background(), func(State) bool { return true }); err != nil {
		t.Fatalf("Await with a true condition = %v", err)
	}
}

func TestEndpointNames(t *testing.T) {
	seen := map[string]bool{}
	for ep := range Endpoint(numEndpoints) {
		name := ep.String()
		if name == "" || seen[name] {
			t.Fatalf("endpoint %d has empty or duplicate name %q", int(ep), name)
		}
		seen[name] = true
	}
	if got := Endpoint(99).String(); got != "Endpoint(99)" {
		t.Fatalf("out-of-range name = %q", got)
	}
	if (State{}).Requests(Endpoint(-1)) != 0 {
		t.Fatal("out-of-range Requests is not zero")
	}
}
