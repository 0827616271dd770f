package admission_test

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/admission"
)

// testTimeout bounds how long a test waits for a Drain it expects to return;
// it only turns a hang into a failure and never paces the test.
const testTimeout = 10 * time.Second

// canceled is a context that is already done: Drain with it returns nil when
// the scope is drained at the moment of the call and ctx.Err() otherwise.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// drainAsync starts Drain on its own goroutine and returns its result channel
// once the drain is parked waiting.
func drainAsync(t *testing.T, tier *admission.Tier, scope admission.Scope) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return drainAsyncCtx(ctx, t, tier, scope)
}

// drainAsyncCtx is drainAsync with the caller's context.
func drainAsyncCtx(ctx context.Context, t *testing.T, tier *admission.Tier, scope admission.Scope) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- tier.Drain(ctx, scope) }()
	for !admission.DrainWaiting(tier) {
		select {
		case err := <-done:
			t.Fatalf("Drain() returned %v before waiting", err)
		default:
			runtime.Gosched()
		}
	}
	return done
}

func threeMembers(t *testing.T) (*admission.Tier, []string) {
	all := []string{"a", "b", "c"}
	return newTier(t, admission.Config{Members: members(5, all...)}), all
}

// leaseOn acquires a lease on member id by making only it ready.
func leaseOn(t *testing.T, tier *admission.Tier, all []string, id string) *admission.Lease {
	t.Helper()
	r := make(map[string]bool, len(all))
	for _, m := range all {
		r[m] = m == id
	}
	return acquire(t, tier, admission.Inputs{Ready: r})
}

func TestMemberDrainWaitsOnlyForItsMember(t *testing.T) {
	tier, all := threeMembers(t)
	a1, a2, b := leaseOn(t, tier, all, "a"), leaseOn(t, tier, all, "a"), leaseOn(t, tier, all, "b")
	if err := tier.Quiesce(admission.MemberScope("a"), "maintenance"); err != nil {
		t.Fatal(err)
	}
	done := drainAsync(t, tier, admission.MemberScope("a"))
	b.Release() // another member's release wakes the drain, which keeps waiting.
	a1.Release()
	if err := tier.Drain(canceled(), admission.MemberScope("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("member a with one lease: Drain() = %v, want it still waiting", err)
	}
	// Other members still admit while a drains.
	leaseOn(t, tier, all, "c").Release()
	a2.Release()
	if err := <-done; err != nil {
		t.Fatalf("Drain(a) = %v, want nil once a holds no lease", err)
	}
	s := tier.Snapshot()
	if s.Members[0].Phase != admission.PhaseDrained || s.Members[1].Phase != admission.PhaseAdmitting {
		t.Fatalf("phases after drain: %+v", s.Members)
	}
}

func TestMemberDrainIgnoresOtherMembers(t *testing.T) {
	tier, all := threeMembers(t)
	b := leaseOn(t, tier, all, "b")
	defer b.Release()
	if err := tier.Quiesce(admission.MemberScope("a"), "maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := tier.Drain(canceled(), admission.MemberScope("a")); err != nil {
		t.Fatalf("Drain(a) with a lease only on b = %v, want nil", err)
	}
}

func TestTierDrainWaitsForAll(t *testing.T) {
	tier, all := threeMembers(t)
	a, b := leaseOn(t, tier, all, "a"), leaseOn(t, tier, all, "b")
	if err := tier.Quiesce(admission.TierScope(), "upgrade"); err != nil {
		t.Fatal(err)
	}
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(all)}); !errors.Is(err, admission.ErrTierQuiesced) {
		t.Fatalf("Acquire() on a quiesced tier = %v", err)
	}
	s := tier.Snapshot()
	if !s.Quiesced || s.Reason != "upgrade" || !s.Draining || s.Members[0].Phase != admission.PhaseDraining || s.Members[2].Phase != admission.PhaseDrained {
		t.Fatalf("snapshot of a draining tier: %+v", s)
	}
	done := drainAsync(t, tier, admission.TierScope())
	a.Release()
	if err := tier.Drain(canceled(), admission.TierScope()); !errors.Is(err, context.Canceled) {
		t.Fatalf("tier with one lease left: Drain() = %v, want it still waiting", err)
	}
	b.Release()
	if err := <-done; err != nil {
		t.Fatalf("Drain(tier) = %v, want nil", err)
	}
	if s := tier.Snapshot(); s.Draining || s.Active != 0 {
		t.Fatalf("snapshot after tier drain: %+v", s)
	}
}

func TestDrainErrors(t *testing.T) {
	tier, _ := threeMembers(t)
	if err := tier.Drain(context.Background(), admission.TierScope()); !errors.Is(err, admission.ErrNotQuiesced) {
		t.Errorf("Drain(unquiesced tier) = %v, want ErrNotQuiesced", err)
	}
	if err := tier.Drain(context.Background(), admission.MemberScope("a")); !errors.Is(err, admission.ErrNotQuiesced) {
		t.Errorf("Drain(unquiesced member) = %v, want ErrNotQuiesced", err)
	}
	if err := tier.Quiesce(admission.TierScope(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := tier.Drain(context.Background(), admission.MemberScope("a")); !errors.Is(err, admission.ErrNotQuiesced) {
		t.Errorf("Drain(member) under tier quiesce only = %v, want ErrNotQuiesced (the member scope is not quiesced)", err)
	}
	if err := tier.Drain(context.Background(), admission.MemberScope("zz")); !errors.Is(err, admission.ErrUnknownMember) {
		t.Errorf("Drain(unknown member) = %v, want ErrUnknownMember", err)
	}
}

func TestDrainNeverCancels(t *testing.T) {
	tier, all := threeMembers(t)
	l := leaseOn(t, tier, all, "a")
	if err := tier.Quiesce(admission.MemberScope("a"), "x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := drainAsyncCtx(ctx, t, tier, admission.MemberScope("a"))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain() after cancel = %v, want context.Canceled", err)
	}
	past, cancelPast := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancelPast()
	if err := tier.Drain(past, admission.MemberScope("a")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain() past its deadline = %v, want context.DeadlineExceeded", err)
	}
	// The lease survived both drains and still releases normally.
	if got := activeOf(tier, "a"); got != 1 {
		t.Fatalf("active on a after drains gave up = %d, want 1", got)
	}
	l.Release()
	if err := tier.Drain(context.Background(), admission.MemberScope("a")); err != nil {
		t.Fatalf("Drain() after the release = %v", err)
	}
}

func TestReadmitDuringDrain(t *testing.T) {
	for _, scope := range []admission.Scope{admission.TierScope(), admission.MemberScope("a")} {
		tier, all := threeMembers(t)
		l := leaseOn(t, tier, all, "a")
		if err := tier.Quiesce(scope, "x"); err != nil {
			t.Fatal(err)
		}
		done := drainAsync(t, tier, scope)
		if err := tier.Readmit(scope); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, admission.ErrNotQuiesced) {
			t.Fatalf("%+v: Drain() across a readmit = %v, want ErrNotQuiesced", scope, err)
		}
		l.Release()
	}
}

func TestQuiesceScopesAreIndependent(t *testing.T) {
	tier, all := threeMembers(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tier.Quiesce(admission.MemberScope("b"), "disk"))
	must(tier.Quiesce(admission.TierScope(), "upgrade"))

	must(tier.Readmit(admission.TierScope()))
	s := tier.Snapshot()
	if s.Quiesced || !s.Members[1].Quiesced || s.Members[1].Reason != "disk" {
		t.Fatalf("tier readmit must leave member quiesce: %+v", s)
	}
	for range 6 {
		l := acquire(t, tier, admission.Inputs{Ready: ready(all)})
		if l.Member() == "b" {
			t.Fatal("quiesced member b admitted after tier readmit")
		}
		l.Release()
	}

	must(tier.Quiesce(admission.TierScope(), "upgrade"))
	must(tier.Readmit(admission.MemberScope("b")))
	s = tier.Snapshot()
	if !s.Quiesced || s.Reason != "upgrade" || s.Members[1].Quiesced {
		t.Fatalf("member readmit must leave tier quiesce: %+v", s)
	}
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(all)}); !errors.Is(err, admission.ErrTierQuiesced) {
		t.Fatalf("Acquire() = %v, want ErrTierQuiesced", err)
	}
}

func TestQuiesceErrors(t *testing.T) {
	tier, _ := threeMembers(t)
	before := tier.Snapshot()
	if err := tier.Quiesce(admission.MemberScope("zz"), "x"); !errors.Is(err, admission.ErrUnknownMember) {
		t.Errorf("Quiesce(unknown) = %v", err)
	}
	if err := tier.Readmit(admission.MemberScope("zz")); !errors.Is(err, admission.ErrUnknownMember) {
		t.Errorf("Readmit(unknown) = %v", err)
	}
	for _, reason := range []string{"", "Bad Reason", "-x"} {
		if err := tier.Quiesce(admission.TierScope(), reason); !errors.Is(err, admission.ErrInvalidReason) {
			t.Errorf("Quiesce(tier, %q) = %v, want ErrInvalidReason", reason, err)
		}
	}
	if after := tier.Snapshot(); !reflect.DeepEqual(after, before) {
		t.Fatalf("failed calls changed the tier: %+v", after)
	}
}

func TestSetIntent(t *testing.T) {
	tier, all := threeMembers(t)
	if err := tier.Quiesce(admission.MemberScope("c"), "old"); err != nil {
		t.Fatal(err)
	}
	intent := admission.Intent{Tier: "upgrade", Members: map[string]string{"a": "disk", "b": "driver"}}
	if err := tier.SetIntent(intent); err != nil {
		t.Fatal(err)
	}
	intent.Members["a"] = "changed" // The tier keeps its own copy.
	s := tier.Snapshot()
	got := []string{s.Reason, s.Members[0].Reason, s.Members[1].Reason, s.Members[2].Reason}
	if want := []string{"upgrade", "disk", "driver", ""}; !reflect.DeepEqual(got, want) {
		t.Fatalf("reasons = %q, want %q (c, absent from the intent, admits)", got, want)
	}

	before := tier.Snapshot()
	for _, bad := range []struct {
		intent admission.Intent
		want   error
	}{
		{admission.Intent{Members: map[string]string{"a": "x", "zz": "y"}}, admission.ErrUnknownMember},
		{admission.Intent{Members: map[string]string{"a": ""}}, admission.ErrInvalidReason},
		{admission.Intent{Tier: "Not Valid"}, admission.ErrInvalidReason},
	} {
		if err := tier.SetIntent(bad.intent); !errors.Is(err, bad.want) {
			t.Errorf("SetIntent(%+v) = %v, want %v", bad.intent, err, bad.want)
		}
	}
	if after := tier.Snapshot(); !reflect.DeepEqual(after, before) {
		t.Fatalf("rejected intents changed the tier: %+v", after)
	}

	if err := tier.SetIntent(admission.Intent{}); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, tier, admission.Inputs{Ready: ready(all)})
	l.Release()
	if s := tier.Snapshot(); s.Quiesced || s.Members[0].Quiesced || s.Members[1].Quiesced {
		t.Fatalf("empty intent must readmit everything: %+v", s)
	}
}

// TestReadmitEpoch: every way a quiesced scope admits again advances the
// epoch, nothing else does, and an Acquire whose inputs carry an older epoch
// is refused without reserving, while one carrying the current epoch (or
// none) is admitted.
func TestReadmitEpoch(t *testing.T) {
	tier, all := threeMembers(t)
	steps := []struct {
		desc    string
		do      func() error
		advance bool
	}{
		{"quiesce a member", func() error { return tier.Quiesce(admission.MemberScope("a"), "maint") }, false},
		{"readmit the member", func() error { return tier.Readmit(admission.MemberScope("a")) }, true},
		{"readmit an admitting member", func() error { return tier.Readmit(admission.MemberScope("a")) }, false},
		{"quiesce the tier", func() error { return tier.Quiesce(admission.TierScope(), "maint") }, false},
		{"readmit the tier", func() error { return tier.Readmit(admission.TierScope()) }, true},
		{"intent quiesces b and the tier", func() error {
			return tier.SetIntent(admission.Intent{Tier: "t", Members: map[string]string{"b": "m"}})
		}, false},
		{"intent keeps both quiesced", func() error {
			return tier.SetIntent(admission.Intent{Tier: "t2", Members: map[string]string{"b": "m2"}})
		}, false},
		{"intent readmits b only", func() error { return tier.SetIntent(admission.Intent{Tier: "t"}) }, true},
		{"intent readmits the tier", func() error { return tier.SetIntent(admission.Intent{}) }, true},
		{"apply with the same intent", func() error {
			return tier.Apply(admission.Config{Members: members(5, all...)}, admission.Intent{})
		}, false},
		{"apply quiescing c", func() error {
			return tier.Apply(admission.Config{Members: members(5, all...)}, admission.Intent{Members: map[string]string{"c": "m"}})
		}, false},
		{"apply readmitting c", func() error {
			return tier.Apply(admission.Config{Members: members(5, all...)}, admission.Intent{})
		}, true},
	}
	for _, s := range steps {
		before := tier.ReadmitEpoch()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.desc, err)
		}
		after := tier.ReadmitEpoch()
		if advanced := after != before; advanced != s.advance {
			t.Fatalf("%s: epoch %d -> %d, want advanced=%v", s.desc, before, after, s.advance)
		}
		if before == 0 || after == 0 {
			t.Fatalf("%s: epoch is 0", s.desc)
		}
	}

	stale := tier.ReadmitEpoch()
	if err := tier.Quiesce(admission.MemberScope("a"), "maint"); err != nil {
		t.Fatal(err)
	}
	if err := tier.Readmit(admission.MemberScope("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := tier.Acquire(admission.Inputs{Ready: ready(all), ReadmitEpoch: stale}); !errors.Is(err, admission.ErrInvalidInput) {
		t.Fatalf("Acquire with a stale epoch = %v, want ErrInvalidInput", err)
	}
	if got := tier.Snapshot().Active; got != 0 {
		t.Fatalf("refused Acquire reserved: active = %d", got)
	}
	for _, epoch := range []uint64{tier.ReadmitEpoch(), 0} {
		lease, err := tier.Acquire(admission.Inputs{Ready: ready(all), ReadmitEpoch: epoch})
		if err != nil {
			t.Fatalf("Acquire with epoch %d: %v", epoch, err)
		}
		lease.Release()
	}
}
