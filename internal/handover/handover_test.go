package handover

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// handoverTiers are the tiers of the handover tests: llama with two
// members of ceiling 2, and other, which some successors do not serve.
func handoverTiers(withOther bool, llamaMembers ...string) []source.Tier {
	var ms []sourcetest.Member
	for _, id := range llamaMembers {
		ms = append(ms, sourcetest.Member{ID: id, Endpoint: "http://127.0.0.1:1", Max: 2})
	}
	list := []source.Tier{sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyRoundRobin, ms)}
	if withOther {
		list = append(list, sourcetest.Tier("ns/other", []string{"other"}, "", []sourcetest.Member{{ID: "solo", Endpoint: "http://127.0.0.1:1"}}))
	}
	return list
}

// handoverRouter returns the tiers of a router serving list, every member
// ready.
func handoverRouter(t *testing.T, list []source.Tier) *tiers.Set {
	t.Helper()
	set := tiers.New(tiers.Options{})
	set.Apply(source.Snapshot{Tiers: list})
	return set
}

// admit acquires a lease of tier on rt, as the router's front door does,
// or fails the test.
func admit(t *testing.T, rt *tiers.Set, tier string) *admission.Lease {
	t.Helper()
	ts, _ := rt.Table().Lookup(tier)
	l, _, err := acquire(t, rt, ts)
	if err != nil {
		t.Fatalf("acquire %s: %v", tier, err)
	}
	return l
}

// acquire makes one admission decision for ts on rt, as the router's
// front door does, and returns the lease and its error.
func acquire(t *testing.T, rt *tiers.Set, ts *tiers.Tier) (*admission.Lease, admission.Waited, error) {
	t.Helper()
	return ts.Admission().Wait(t.Context(), rt.Inputs(ts, ts.Config()), admission.Tenant{})
}

// activeCounts returns tier's member → active count on rt ("" → the tier's).
func activeCounts(rt *tiers.Set, tier string) map[string]int {
	ts, _ := rt.Table().Lookup(tier)
	if ts == nil {
		return nil
	}
	s := ts.Admission().Snapshot()
	out := map[string]int{"": s.Active}
	for _, m := range s.Members {
		out[m.ID] = m.Active
	}
	return out
}

// handoverPair is a predecessor serving and a successor adopting over an
// in-memory pipe.
type handoverPair struct {
	served, adoptedDone chan error
	adopted             chan AdoptedLeases
	changed             chan struct{}
	cancelServe         context.CancelFunc
	cancelAdopt         context.CancelFunc
}

// handOver runs Serve of old and Adopt of successor on a pipe
// and waits for the adoption of the snapshot.
func handOver(t *testing.T, old, successor *tiers.Set) *handoverPair {
	t.Helper()
	a, b := net.Pipe()
	sctx, scancel := context.WithCancel(context.Background())
	actx, acancel := context.WithCancel(context.Background())
	p := &handoverPair{served: make(chan error, 1), adoptedDone: make(chan error, 1), adopted: make(chan AdoptedLeases, 1),
		changed: make(chan struct{}, 64), cancelServe: scancel, cancelAdopt: acancel}
	var wg sync.WaitGroup
	wg.Go(func() { p.served <- Serve(sctx, old, a, Gate{}) })
	wg.Go(func() {
		p.adoptedDone <- Adopt(actx, successor, b, Adoption{
			Adopted: func(s AdoptedLeases) { p.adopted <- s },
			Changed: func() { p.changed <- struct{}{} },
		})
	})
	t.Cleanup(func() { scancel(); acancel(); wg.Wait() })
	return p
}

// wait returns the value received from c or fails the test after failSafe.
func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(failSafe):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// TestHandoverSnapshotAndReleases hands three llama leases and one lease
// of a tier the successor does not serve over: the successor adopts the
// llama leases against its own ceilings, ignores the other, releases one
// for each release the predecessor reports, and the predecessor admits
// nothing after the snapshot.
func TestHandoverSnapshotAndReleases(t *testing.T) {
	old := handoverRouter(t, handoverTiers(true, "gpu0", "gpu1"))
	successor := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	l1, l2, l3 := admit(t, old, "ns/llama"), admit(t, old, "ns/llama"), admit(t, old, "ns/llama")
	other := admit(t, old, "ns/other")
	p := handOver(t, old, successor)
	if got := wait(t, p.adopted, "the adoption"); got != (AdoptedLeases{Adopted: 3, Ignored: 1}) {
		t.Fatalf("adopted %+v, want 3 adopted and 1 ignored", got)
	}
	want := activeCounts(old, "ns/llama")
	if got := activeCounts(successor, "ns/llama"); got[""] != 3 || got["gpu0"] != want["gpu0"] || got["gpu1"] != want["gpu1"] {
		t.Fatalf("successor counts %v, predecessor's %v", got, want)
	}
	ts, _ := old.Table().Lookup("ns/llama")
	if _, _, err := acquire(t, old, ts); !errors.Is(err, admission.ErrHandedOver) {
		t.Fatalf("predecessor acquire after the handover = %v, want ErrHandedOver", err)
	}
	// The successor's ceiling counts the adopted leases: gpu0 and gpu1
	// have room for one more between them.
	fresh := admit(t, successor, "ns/llama")
	sts, _ := successor.Table().Lookup("ns/llama")
	if _, _, err := acquire(t, successor, sts); !errors.Is(err, admission.ErrTierFull) {
		t.Fatalf("successor acquire over the ceilings = %v, want ErrTierFull", err)
	}
	fresh.Release()

	for i, l := range []*admission.Lease{l1, l2, other, l3} {
		l.Release()
		// Every release is sent, the other tier's too (the successor
		// ignores it).
		wait(t, p.changed, "a change")
		got, want := activeCounts(successor, "ns/llama"), activeCounts(old, "ns/llama")
		if got[""] != want[""] || got["gpu0"] != want["gpu0"] || got["gpu1"] != want["gpu1"] {
			t.Fatalf("after release %d: successor %v, predecessor %v", i, got, want)
		}
	}
	p.cancelServe()
	if err := wait(t, p.served, "Serve"); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if err := wait(t, p.adoptedDone, "Adopt"); err != nil {
		t.Fatalf("Adopt = %v", err)
	}
	if got := activeCounts(successor, "ns/llama"); got[""] != 0 {
		t.Fatalf("successor counts after the predecessor stopped: %v", got)
	}
}

// TestHandoverPredecessorCrashReleasesAll ends the channel abruptly
// after the snapshot: every adopted lease is released.
func TestHandoverPredecessorCrashReleasesAll(t *testing.T) {
	successor := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	a, b := net.Pipe()
	done := make(chan error, 1)
	adopted := make(chan AdoptedLeases, 1)
	go func() {
		done <- Adopt(context.Background(), successor, b, Adoption{Adopted: func(s AdoptedLeases) { adopted <- s }})
	}()
	r := newHandoverReader(a)
	var hello handoverMessage
	if err := r.read(&hello); err != nil || hello.Kind != kindHello || hello.Version != Version {
		t.Fatalf("hello %+v, %v", hello, err)
	}
	w := handoverWriter{conn: a}
	if err := w.write(handoverMessage{Kind: kindSnapshot, Counts: []handoverCount{
		{Tier: "ns/llama", Member: "gpu0", Count: 2}, {Tier: "ns/llama", Member: "gpu1", Count: 2}, {Tier: "ns/llama", Member: "gone", Count: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, adopted, "the adoption"); got != (AdoptedLeases{Adopted: 4, Ignored: 1}) {
		t.Fatalf("adopted %+v", got)
	}
	if got := activeCounts(successor, "ns/llama"); got[""] != 4 {
		t.Fatalf("successor counts %v, want 4 adopted", got)
	}
	_ = a.Close()
	if err := wait(t, done, "Adopt"); err != nil {
		t.Fatalf("Adopt = %v, want nil on a closed channel", err)
	}
	if got := activeCounts(successor, "ns/llama"); got[""] != 0 {
		t.Fatalf("successor counts after the crash: %v, want 0", got)
	}
}

// TestHandoverBadPeers covers a predecessor dying before its snapshot, a
// malformed message, and a successor with a wrong hello or one that
// leaves: the adopting side adopts nothing and the serving side admits
// again.
func TestHandoverBadPeers(t *testing.T) {
	t.Run("predecessor dies before the snapshot", func(t *testing.T) {
		successor := handoverRouter(t, handoverTiers(false, "gpu0"))
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- Adopt(context.Background(), successor, b, Adoption{Adopted: func(AdoptedLeases) { t.Error("adopted without a snapshot") }})
		}()
		if err := newHandoverReader(a).read(&handoverMessage{}); err != nil {
			t.Fatal(err)
		}
		_ = a.Close()
		if err := wait(t, done, "Adopt"); err == nil {
			t.Fatal("Adopt = nil without a snapshot")
		}
	})
	t.Run("malformed change", func(t *testing.T) {
		successor := handoverRouter(t, handoverTiers(false, "gpu0"))
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- Adopt(context.Background(), successor, b, Adoption{}) }()
		_ = newHandoverReader(a).read(&handoverMessage{})
		w := handoverWriter{conn: a}
		_ = w.write(handoverMessage{Kind: kindSnapshot, Counts: []handoverCount{{Tier: "ns/llama", Member: "gpu0", Count: 1}}})
		_ = w.write(handoverMessage{Kind: kindChanges, Counts: []handoverCount{{Tier: "ns/llama", Member: "gpu0", Count: 5}}})
		if err := wait(t, done, "Adopt"); !errors.Is(err, ErrProtocol) {
			t.Fatalf("Adopt = %v, want ErrProtocol", err)
		}
		_ = a.Close()
		if got := activeCounts(successor, "ns/llama"); got[""] != 0 {
			t.Fatalf("counts after the protocol error: %v", got)
		}
	})
	t.Run("wrong hello", func(t *testing.T) {
		old := handoverRouter(t, handoverTiers(false, "gpu0"))
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- Serve(context.Background(), old, a, Gate{}) }()
		_ = handoverWriter{conn: b}.write(handoverMessage{Kind: kindHello, Version: "sluice-handover/0"})
		if err := wait(t, done, "Serve"); !errors.Is(err, ErrProtocol) {
			t.Fatalf("Serve = %v, want ErrProtocol", err)
		}
		admit(t, old, "ns/llama").Release()
	})
	t.Run("successor leaves", func(t *testing.T) {
		old := handoverRouter(t, handoverTiers(false, "gpu0"))
		held := admit(t, old, "ns/llama")
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- Serve(context.Background(), old, a, Gate{}) }()
		w, r := handoverWriter{conn: b}, newHandoverReader(b)
		_ = w.write(handoverMessage{Kind: kindHello, Version: Version})
		var snap handoverMessage
		if err := r.read(&snap); err != nil || snap.Kind != kindSnapshot || len(snap.Counts) != 1 || snap.Counts[0].Count != 1 {
			t.Fatalf("snapshot %+v, %v", snap, err)
		}
		_ = b.Close()
		if err := wait(t, done, "Serve"); !errors.Is(err, ErrSuccessorGone) {
			t.Fatalf("Serve = %v, want ErrSuccessorGone", err)
		}
		admit(t, old, "ns/llama").Release()
		held.Release()
	})
}

// TestHandoverAdoptedMemberRemoved removes an adopted member from the
// successor's configuration: the member stops admitting, and the
// predecessor's release still returns its reservation.
func TestHandoverAdoptedMemberRemoved(t *testing.T) {
	old := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	successor := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	l0, l1 := admit(t, old, "ns/llama"), admit(t, old, "ns/llama")
	p := handOver(t, old, successor)
	wait(t, p.adopted, "the adoption")
	successor.Apply(source.Snapshot{Tiers: handoverTiers(false, "gpu0")})
	if got := activeCounts(successor, "ns/llama"); got[""] != 2 || got["gpu1"] != 1 {
		t.Fatalf("successor counts after removing gpu1: %v", got)
	}
	for _, l := range []*admission.Lease{l0, l1} {
		l.Release()
		wait(t, p.changed, "a change")
	}
	if got := activeCounts(successor, "ns/llama"); got[""] != 0 || len(got) != 2 {
		t.Fatalf("successor counts after the releases: %v, want gpu0 only, idle", got)
	}
}

// TestHandoverChain hands over twice: a router that adopted leases hands
// them, with its own, to a third; the first router's releases travel
// through the second to the third, and the second's own releases too.
func TestHandoverChain(t *testing.T) {
	first := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	second := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	third := handoverRouter(t, handoverTiers(false, "gpu0", "gpu1"))
	fromFirst := admit(t, first, "ns/llama")
	p1 := handOver(t, first, second)
	wait(t, p1.adopted, "the second's adoption")
	own := admit(t, second, "ns/llama")
	p2 := handOver(t, second, third)
	if got := wait(t, p2.adopted, "the third's adoption"); got.Adopted != 2 {
		t.Fatalf("third adopted %+v, want 2", got)
	}
	fromFirst.Release()
	wait(t, p1.changed, "the first's release at the second")
	wait(t, p2.changed, "the first's release at the third")
	if got := activeCounts(third, "ns/llama"); got[""] != 1 {
		t.Fatalf("third counts after the first's release: %v", got)
	}
	own.Release()
	wait(t, p2.changed, "the second's release at the third")
	if got := activeCounts(third, "ns/llama"); got[""] != 0 {
		t.Fatalf("third counts after every release: %v", got)
	}
}

// predecessorSays plays a predecessor on a pipe to successor.Adopt:
// it reads the hello, sends snapshot, then each message of changes, and
// returns Adopt's result and whether the snapshot was adopted. It
// closes the channel once Adopt returned or the messages are sent.
func predecessorSays(t *testing.T, successor *tiers.Set, snapshot []handoverCount, changes ...[]handoverCount) (error, bool) {
	t.Helper()
	a, b := net.Pipe()
	defer func() { _ = a.Close() }()
	done := make(chan error, 1)
	adopted := make(chan AdoptedLeases, 1)
	go func() {
		done <- Adopt(context.Background(), successor, b, Adoption{Adopted: func(s AdoptedLeases) { adopted <- s }})
	}()
	if err := newHandoverReader(a).read(&handoverMessage{}); err != nil {
		t.Fatal(err)
	}
	w := handoverWriter{conn: a}
	for _, m := range append([]handoverMessage{{Kind: kindSnapshot, Counts: snapshot}}, changesMessages(changes)...) {
		if err := w.write(m); err != nil {
			break // Adopt ended and closed its side.
		}
	}
	_ = a.Close()
	err := wait(t, done, "Adopt")
	select {
	case <-adopted:
		return err, true
	default:
		return err, false
	}
}

// changesMessages wraps each list of counts in a changes message.
func changesMessages(changes [][]handoverCount) []handoverMessage {
	out := make([]handoverMessage, 0, len(changes))
	for _, c := range changes {
		out = append(out, handoverMessage{Kind: kindChanges, Counts: c})
	}
	return out
}

// TestHandoverRefusesCountsPastCeilings: a predecessor whose snapshot
// would take a member past its ceiling, a tier past its own, or claims a
// million leases is refused whole before anything is adopted; a
// reservation after the snapshot that would pass a ceiling ends the
// handover and releases what was adopted; counts within the ceilings are
// adopted.
func TestHandoverRefusesCountsPastCeilings(t *testing.T) {
	tierCeiling := func(s *v1alpha1.ReplicaTierSpec) { three := int32(3); s.MaxConcurrency = &three }
	tiers := []source.Tier{
		// llama: gpu0 and gpu1 of ceiling 2 each, the tier 4.
		handoverTiers(false, "gpu0", "gpu1")[0],
		// capped: members of ceiling 2 each under a tier ceiling of 3.
		sourcetest.Tier("ns/capped", []string{"capped"}, v1alpha1.StrategyRoundRobin,
			[]sourcetest.Member{{ID: "a", Endpoint: "http://127.0.0.1:1", Max: 2}, {ID: "b", Endpoint: "http://127.0.0.1:1", Max: 2}}, tierCeiling),
		// open: one member without any ceiling.
		sourcetest.Tier("ns/open", []string{"open"}, "", []sourcetest.Member{{ID: "solo", Endpoint: "http://127.0.0.1:1"}}),
	}
	for _, tt := range []struct {
		desc     string
		snapshot []handoverCount
		changes  [][]handoverCount
		want     error // nil: adopted, and the channel's end releases it.
	}{
		{desc: "within the ceilings", snapshot: []handoverCount{
			{"ns/llama", "gpu0", 2}, {"ns/llama", "gpu1", 2}, {"ns/capped", "a", 2}, {"ns/capped", "b", 1}, {"ns/open", "solo", 1000},
			{"ns/gone", "x", 7},
		}},
		{desc: "a member past its ceiling", snapshot: []handoverCount{{"ns/llama", "gpu0", 3}}, want: ErrBounds},
		{desc: "a member past its ceiling in two entries", snapshot: []handoverCount{{"ns/llama", "gpu0", 2}, {"ns/llama", "gpu0", 1}},
			want: ErrBounds},
		{desc: "a tier past its ceiling", snapshot: []handoverCount{{"ns/capped", "a", 2}, {"ns/capped", "b", 2}}, want: ErrBounds},
		{desc: "a million leases", snapshot: []handoverCount{{"ns/llama", "gpu0", 1_000_000}}, want: ErrBounds},
		{desc: "a million leases of a member without a ceiling", snapshot: []handoverCount{{"ns/open", "solo", 1_000_000}},
			want: ErrBounds},
		{desc: "a million leases of a tier not served", snapshot: []handoverCount{{"ns/gone", "x", 1_000_000}}, want: ErrBounds},
		{desc: "a reservation past the ceiling", snapshot: []handoverCount{{"ns/llama", "gpu0", 2}},
			changes: [][]handoverCount{{{"ns/llama", "gpu0", 1}}}, want: ErrBounds},
		{desc: "a reservation past the tier ceiling", snapshot: []handoverCount{{"ns/capped", "a", 2}, {"ns/capped", "b", 1}},
			changes: [][]handoverCount{{{"ns/capped", "b", 1}}}, want: ErrBounds},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			successor := handoverRouter(t, tiers)
			err, adopted := predecessorSays(t, successor, tt.snapshot, tt.changes...)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Adopt = %v, want %v", err, tt.want)
			}
			if wantAdopted := tt.want == nil || tt.changes != nil; adopted != wantAdopted {
				t.Fatalf("snapshot adopted: %v, want %v", adopted, wantAdopted)
			}
			for _, tier := range []string{"ns/llama", "ns/capped", "ns/open"} {
				if got := activeCounts(successor, tier); got[""] != 0 {
					t.Fatalf("%s holds %v after the handover ended", tier, got)
				}
			}
			// The router admits up to its ceilings: nothing adopted stays.
			for range 4 {
				admit(t, successor, "ns/llama")
			}
		})
	}
}

// TestServeHello: nothing is handed over before a valid hello: a
// silent successor is cut off by the read deadline, and one that hangs up,
// sends a wrong hello, is refused by the gate or outlives ctx leaves the
// tiers admitting; the gate is asked only after a valid hello.
func TestServeHello(t *testing.T) {
	for _, tt := range []struct {
		desc    string
		say     string // what the peer sends, then it waits.
		hangUp  bool   // the peer closes the channel after saying it.
		refuse  bool   // the gate refuses.
		cancel  bool   // ctx ends while the hello is awaited.
		asked   bool   // the gate is asked.
		wantErr error
	}{
		{desc: "silent", wantErr: os.ErrDeadlineExceeded},
		{desc: "hangs up", hangUp: true, wantErr: ErrSuccessorGone},
		{desc: "half a hello", say: `{"kind":"hel`, wantErr: ErrProtocol},
		{desc: "wrong hello", say: `{"kind":"hello","version":"sluice-handover/0"}` + "\n", wantErr: ErrProtocol},
		{desc: "refused", say: `{"kind":"hello","version":"` + Version + `"}` + "\n", refuse: true, asked: true,
			wantErr: ErrRefused},
		{desc: "router stops", cancel: true, wantErr: context.Canceled},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			old := handoverRouter(t, handoverTiers(false, "gpu0"))
			a, b := net.Pipe()
			defer func() { _ = b.Close() }()
			// The deadline the silent cases run into; the others end long
			// before it.
			deadline := 50 * time.Millisecond
			if tt.cancel {
				deadline = failSafe
			}
			_ = a.SetReadDeadline(time.Now().Add(deadline))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			asked := make(chan struct{}, 1)
			done := make(chan error, 1)
			go func() {
				done <- Serve(ctx, old, a, Gate{Hello: func() bool { asked <- struct{}{}; return !tt.refuse }})
			}()
			if tt.say != "" {
				if _, err := io.WriteString(b, tt.say); err != nil {
					t.Fatal(err)
				}
			}
			if tt.hangUp {
				_ = b.Close()
			}
			if tt.cancel {
				cancel()
			}
			if err := wait(t, done, "Serve"); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Serve = %v, want %v", err, tt.wantErr)
			}
			if got := len(asked) == 1; got != tt.asked {
				t.Fatalf("gate asked: %v, want %v", got, tt.asked)
			}
			admit(t, old, "ns/llama").Release()
		})
	}
}
