package readiness

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestRecheck proves Recheck makes the member not ready before anything is
// probed, wakes only its prober (no tick is needed), and that the member is
// ready again once that probe passes.
func TestRecheck(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a", "b")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	for _, c := range h.prober.nextN(t, 2) {
		c.reply <- nil
	}
	h.waitProbed(t, "a", "b")
	if got := mustReady(t, h.c, "t"); !got["a"] || !got["b"] {
		t.Fatalf("Ready = %v, want both", got)
	}

	h.c.Recheck("t", "a")
	if got := mustReady(t, h.c, "t"); got["a"] || !got["b"] {
		t.Fatalf("Ready right after Recheck = %v, want b only", got)
	}
	c := h.prober.next(t)
	if c.member() != "a" {
		t.Fatalf("Recheck probed %s, want a", c.member())
	}
	if got := mustReady(t, h.c, "t"); got["a"] {
		t.Fatalf("Ready while the recheck probe runs = %v, want a not ready", got)
	}
	c.reply <- nil
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); !got["a"] || !got["b"] {
		t.Fatalf("Ready after the recheck probe passed = %v, want both", got)
	}

	// A failing recheck probe keeps the member out until a later probe passes.
	h.c.Recheck("t", "b")
	h.prober.next(t).reply <- ErrModelNotServed
	h.waitProbed(t, "b")
	if got := mustReady(t, h.c, "t"); got["b"] {
		t.Fatalf("Ready after a failed recheck probe = %v, want b not ready", got)
	}
	h.prober.idle(t)
	h.clock.Step(interval)
	for _, c := range h.prober.nextN(t, 2) {
		c.reply <- nil
	}
	h.waitProbed(t, "a", "b")
	if got := mustReady(t, h.c, "t"); !got["a"] || !got["b"] {
		t.Fatalf("Ready after the next tick = %v, want both", got)
	}
	h.stop(t)
}

// TestRecheckIgnoresProbeInFlight proves a probe that started before the
// Recheck cannot make the member ready, even when it passes after it: only
// the probe the Recheck asked for can.
func TestRecheckIgnoresProbeInFlight(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	h.prober.next(t).reply <- nil
	h.waitProbed(t, "a")
	h.clock.Step(interval)
	held := h.prober.next(t) // started before the Recheck, held in flight.

	h.c.Recheck("t", "a")
	h.c.Recheck("t", "a") // a second request while one is pending never blocks.
	if got := mustReady(t, h.c, "t"); got["a"] {
		t.Fatalf("Ready right after Recheck = %v, want not ready", got)
	}
	held.reply <- nil
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); got["a"] {
		t.Fatalf("Ready after the earlier probe passed = %v, want not ready", got)
	}
	// The pending wake starts the probe that counts; the second Recheck
	// asked for no extra one.
	h.prober.next(t).reply <- nil
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); !got["a"] {
		t.Fatalf("Ready after the recheck probe passed = %v, want ready", got)
	}
	h.prober.idle(t)
	if n := h.prober.n.Load(); n != 3 {
		t.Fatalf("%d probes, want 3", n)
	}
	h.stop(t)
}

// TestRecheckBeforeRun proves a Recheck before Run keeps the member not
// ready until the first probe of Run passes.
func TestRecheckBeforeRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	h.c.Recheck("t", "a")
	h.prober.idle(t)
	h.run(t)
	h.prober.next(t).reply <- nil
	h.waitProbed(t, "a")
	if got := mustReady(t, h.c, "t"); !got["a"] {
		t.Fatalf("Ready after the first probe = %v, want ready", got)
	}
	// The probe the Recheck asked for is the first probe of Run: the
	// request is served once, not twice.
	h.prober.idle(t)
	h.stop(t)
}

// TestRecheckUnknownAndClosed proves Recheck ignores tiers and members it
// does not know and a closed cache, changing nothing.
func TestRecheckUnknownAndClosed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	if err := h.c.Reconfigure([]Tier{tier("t", served, "a")}); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	h.prober.next(t).reply <- nil
	h.waitProbed(t, "a")

	h.c.Recheck("nope", "a")
	h.c.Recheck("t", "zz")
	h.c.Recheck("", "")
	if got := mustReady(t, h.c, "t"); !got["a"] {
		t.Fatalf("Ready after Recheck of unknown scopes = %v, want a ready", got)
	}
	h.prober.idle(t)

	h.c.Close()
	h.c.Recheck("t", "a")
	h.prober.idle(t)
	if got := mustReady(t, h.c, "t"); got["a"] {
		t.Fatalf("Ready after Close = %v, want not ready", got)
	}
	h.stop(t)
}

// TestRecheckConcurrent runs Recheck, Ready and Reconfigure together under
// the race detector: Recheck never blocks and the member ends ready once a
// probe after the last Recheck passes.
func TestRecheckConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const rounds = 200 // enough interleavings for the race detector, fast.
	h := newHarness(t)
	h.uncounted.Store(true) // more probes than the harness's channel holds.
	tiers := []Tier{tier("t", served, "a", "b")}
	if err := h.c.Reconfigure(tiers); err != nil {
		t.Fatal(err)
	}
	h.run(t)
	answered := make(chan struct{})
	go func() { // answers every probe until the test is done.
		defer close(answered)
		for c := range h.prober.calls {
			c.reply <- nil
		}
	}()
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		wg.Go(func() {
			for range rounds {
				h.c.Recheck("t", id)
				if _, err := h.c.Ready("t"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds / 10 {
			if err := h.c.Reconfigure(tiers); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	// Wait for probes started after the last Recheck of each member to pass.
	for _, id := range []string{"a", "b"} {
		if ready, err := h.c.ProbeNow(t.Context(), "t", id); err != nil || !ready {
			t.Fatalf("ProbeNow(%s) = %v, %v", id, ready, err)
		}
	}
	if got := mustReady(t, h.c, "t"); !got["a"] || !got["b"] {
		t.Fatalf("Ready = %v, want both", got)
	}
	h.stop(t)
	close(h.prober.calls)
	<-answered
}
