package transition_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/transition"
	tt "github.com/sluice-dev/sluice/internal/transition/transitiontest"
)

// drainTimeout bounds the drains of these tests that are meant to time out:
// long enough for a loaded machine to send the patch and open the watch.
const drainTimeout = 300 * time.Millisecond

func newClient(e *tt.Env, dryRun bool) *transition.Client {
	return &transition.Client{Client: e.Client, Namespace: tt.Namespace, DryRun: dryRun}
}

func TestGet(t *testing.T) {
	e := tt.New(t)
	c := newClient(e, false)
	got, err := c.Get(context.Background(), "llama")
	if err != nil || got.Name != "llama" || got.Generation != 3 {
		t.Fatalf("Get(llama) = %v, %v", got, err)
	}
	_, err = c.Get(context.Background(), "nope")
	if !errors.Is(err, transition.ErrTierNotFound) || err.Error() != "replicatier not found: inference/nope" {
		t.Fatalf("Get(nope) err = %v", err)
	}
}

// TestChecksBeforeAnyChange proves every refused transition is refused
// before any patch, with its sentinel and a message naming the problem.
func TestChecksBeforeAnyChange(t *testing.T) {
	tests := []struct {
		desc    string
		call    func(c *transition.Client) error
		wantErr error
		wantMsg string
	}{
		{"unknown member quiesce", func(c *transition.Client) error {
			_, _, err := c.Quiesce(context.Background(), "llama", "gpu7", "x")
			return err
		}, transition.ErrUnknownMember, `tier inference/llama has no member "gpu7" (members: gpu0, gpu1)`},
		{"unknown member readmit", func(c *transition.Client) error {
			_, _, err := c.Readmit(context.Background(), "llama", "gpu7")
			return err
		}, transition.ErrUnknownMember, `no member "gpu7"`},
		{"unknown member drain", func(c *transition.Client) error {
			_, _, err := c.Drain(context.Background(), "llama", "gpu7", time.Minute)
			return err
		}, transition.ErrUnknownMember, `no member "gpu7"`},
		{"direct tier member quiesce", func(c *transition.Client) error {
			_, _, err := c.Quiesce(context.Background(), "embed", "gpu0", "x")
			return err
		}, transition.ErrDirectTier, "inference/embed has one member"},
		{"direct tier member readmit", func(c *transition.Client) error {
			_, _, err := c.Readmit(context.Background(), "embed", "gpu0")
			return err
		}, transition.ErrDirectTier, "one member"},
		{"direct tier member drain", func(c *transition.Client) error {
			_, _, err := c.Drain(context.Background(), "embed", "gpu0", time.Minute)
			return err
		}, transition.ErrDirectTier, "one member"},
		{"bad reason", func(c *transition.Client) error {
			_, _, err := c.Quiesce(context.Background(), "llama", "", "Not OK")
			return err
		}, transition.ErrInvalidReason, `invalid reason "Not OK"`},
		{"empty reason", func(c *transition.Client) error {
			_, _, err := c.Quiesce(context.Background(), "llama", "gpu0", "")
			return err
		}, transition.ErrInvalidReason, "1-63 lowercase"},
		{"unknown tier quiesce", func(c *transition.Client) error {
			_, _, err := c.Quiesce(context.Background(), "nope", "", "x")
			return err
		}, transition.ErrTierNotFound, "inference/nope"},
		{"unknown tier readmit", func(c *transition.Client) error {
			_, _, err := c.Readmit(context.Background(), "nope", "")
			return err
		}, transition.ErrTierNotFound, "inference/nope"},
		{"unknown tier drain", func(c *transition.Client) error {
			_, _, err := c.Drain(context.Background(), "nope", "", time.Minute)
			return err
		}, transition.ErrTierNotFound, "inference/nope"},
	}
	for _, tc := range tests {
		for _, dryRun := range []bool{false, true} {
			t.Run(tc.desc, func(t *testing.T) {
				e := tt.New(t)
				before := e.Tier(t, "llama").ResourceVersion
				err := tc.call(newClient(e, dryRun))
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
				}
				if p := e.TakePatches(); len(p) != 0 {
					t.Fatalf("patches sent despite the error: %+v", p)
				}
				if rv := e.Tier(t, "llama").ResourceVersion; rv != before {
					t.Fatalf("resourceVersion %s, was %s", rv, before)
				}
			})
		}
	}
}

func TestCheckScope(t *testing.T) {
	e := tt.New(t)
	llama, embed := e.Tier(t, "llama"), e.Tier(t, "embed")
	for _, tc := range []struct {
		tier    *v1alpha1.ReplicaTier
		member  string
		wantErr error
	}{
		{llama, "", nil},
		{llama, "gpu1", nil},
		{llama, "gpu2", transition.ErrUnknownMember},
		{embed, "", nil},
		{embed, "gpu0", transition.ErrDirectTier},
		{embed, "gpu1", transition.ErrUnknownMember},
	} {
		if err := transition.CheckScope(tc.tier, tc.member); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("CheckScope(%s, %q) = %v, want %v", tc.tier.Name, tc.member, err, tc.wantErr)
		}
	}
}

// TestScopesAreIndependent proves each transition patches exactly its
// scope's key with a JSON merge patch, so member and tier intent never
// touch each other, and asking for what is already so sends nothing.
func TestScopesAreIndependent(t *testing.T) {
	e := tt.New(t)
	c := newClient(e, false)
	ctx := context.Background()
	steps := []struct {
		desc      string
		call      func() (*v1alpha1.ReplicaTier, string, error)
		wantMsg   string
		wantPatch string
		wantTier  string
		wantGPU0  string
		wantGPU1  string
	}{
		{"quiesce tier", func() (*v1alpha1.ReplicaTier, string, error) { return c.Quiesce(ctx, "llama", "", "upgrade") },
			"replicatier.sluice.dev/llama quiesced (upgrade)", `{"spec":{"quiesce":{"tier":"upgrade"}}}`, "upgrade", "", "maintenance"},
		{"readmit gpu1", func() (*v1alpha1.ReplicaTier, string, error) { return c.Readmit(ctx, "llama", "gpu1") },
			"replicatier.sluice.dev/llama member gpu1 readmitted", `{"spec":{"quiesce":{"members":{"gpu1":null}}}}`, "upgrade", "", ""},
		{"quiesce gpu0", func() (*v1alpha1.ReplicaTier, string, error) { return c.Quiesce(ctx, "llama", "gpu0", "driver") },
			"replicatier.sluice.dev/llama member gpu0 quiesced (driver)", `{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}`, "upgrade", "driver", ""},
		{"readmit tier", func() (*v1alpha1.ReplicaTier, string, error) { return c.Readmit(ctx, "llama", "") },
			"replicatier.sluice.dev/llama readmitted", `{"spec":{"quiesce":{"tier":null}}}`, "", "driver", ""},
	}
	for _, s := range steps {
		got, msg, err := s.call()
		if err != nil || msg != s.wantMsg {
			t.Fatalf("%s: %q, %v; want %q", s.desc, msg, err, s.wantMsg)
		}
		p := e.TakePatches()
		if len(p) != 1 || p[0].Type != types.MergePatchType || p[0].Body != s.wantPatch || p[0].DryRun {
			t.Fatalf("%s: patches %+v, want one merge patch %s", s.desc, p, s.wantPatch)
		}
		cur := e.Tier(t, "llama")
		if transition.Intent(cur, "") != s.wantTier || transition.Intent(cur, "gpu0") != s.wantGPU0 || transition.Intent(cur, "gpu1") != s.wantGPU1 {
			t.Fatalf("%s: intent tier=%q gpu0=%q gpu1=%q", s.desc, transition.Intent(cur, ""), transition.Intent(cur, "gpu0"), transition.Intent(cur, "gpu1"))
		}
		if got.Generation != cur.Generation || got.ResourceVersion != cur.ResourceVersion {
			t.Fatalf("%s: returned generation %d rv %s, stored %d rv %s", s.desc, got.Generation, got.ResourceVersion, cur.Generation, cur.ResourceVersion)
		}
	}
	_, msg, err := c.Quiesce(ctx, "llama", "gpu0", "driver")
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu0 already quiesced (driver)" || len(e.TakePatches()) != 0 {
		t.Fatalf("repeat quiesce: %v %q", err, msg)
	}
	_, msg, err = c.Readmit(ctx, "llama", "")
	if err != nil || msg != "replicatier.sluice.dev/llama already admitting" || len(e.TakePatches()) != 0 {
		t.Fatalf("repeat readmit: %v %q", err, msg)
	}
}

// TestDryRun proves a dry-run Client sends its patches as server-side dry
// runs and stores nothing; a dry-run drain does not wait.
func TestDryRun(t *testing.T) {
	e := tt.New(t)
	c := newClient(e, true)
	ctx := context.Background()
	before := e.Tier(t, "llama")

	_, msg, err := c.Quiesce(ctx, "llama", "gpu0", "driver")
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu0 quiesced (driver) (server dry run)" {
		t.Fatalf("quiesce: %v %q", err, msg)
	}
	_, msg, err = c.Readmit(ctx, "llama", "gpu1")
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu1 readmitted (server dry run)" {
		t.Fatalf("readmit: %v %q", err, msg)
	}
	_, msg, err = c.Drain(ctx, "llama", "gpu0", time.Minute)
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu0 quiesced (drain); not waiting for the drain (server dry run)" {
		t.Fatalf("drain: %v %q", err, msg)
	}
	_, msg, err = c.Drain(ctx, "llama", "gpu1", time.Minute)
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu1 already quiesced (maintenance); nothing to change (server dry run)" {
		t.Fatalf("drain of a quiesced member: %v %q", err, msg)
	}
	p := e.TakePatches()
	want := []string{
		`{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}`,
		`{"spec":{"quiesce":{"members":{"gpu1":null}}}}`,
		`{"spec":{"quiesce":{"members":{"gpu0":"drain"}}}}`,
	}
	if len(p) != len(want) {
		t.Fatalf("patches %+v, want %d", p, len(want))
	}
	for i := range want {
		if !p[i].DryRun || p[i].Body != want[i] {
			t.Fatalf("patch %d = %+v, want dry run %s", i, p[i], want[i])
		}
	}
	after := e.Tier(t, "llama")
	if after.ResourceVersion != before.ResourceVersion || transition.Intent(after, "gpu0") != "" || transition.Intent(after, "gpu1") != "maintenance" {
		t.Fatalf("a dry run changed the tier: rv %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
}

// TestDrainWaitsForTheRouter proves Drain quiesces the member and returns
// only once the router reports it Drained for the current generation, not
// while it is Draining.
func TestDrainWaitsForTheRouter(t *testing.T) {
	e := tt.New(t)
	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	stop := e.FakeRouter(t, release, draining)
	defer stop()

	type result struct {
		tier *v1alpha1.ReplicaTier
		msg  string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		got, msg, err := newClient(e, false).Drain(context.Background(), "llama", "gpu0", time.Minute)
		done <- result{got, msg, err}
	}()
	tt.WaitFor(t, draining, "the router's report of Draining")
	tt.WaitFor(t, e.Watching, "drain's watch")
	select {
	case r := <-done:
		t.Fatalf("drain returned while the member was Draining: %+v", r)
	default:
	}
	close(release)
	r := tt.WaitFor(t, done, "drain's return after Drained")
	if r.err != nil || r.msg != "replicatier.sluice.dev/llama member gpu0 drained" {
		t.Fatalf("drain: %v %q", r.err, r.msg)
	}
	s := transition.NewStatus(r.tier, "gpu0")
	if len(s.Members) != 1 || s.Members[0].Phase != "Drained" || s.Members[0].Quiesce != transition.DefaultDrainReason ||
		*s.AppliedGeneration != s.Generation || s.Generation != 4 {
		t.Fatalf("final status %+v", s)
	}
	if p := e.TakePatches(); len(p) != 1 || p[0].Body != `{"spec":{"quiesce":{"members":{"gpu0":"drain"}}}}` {
		t.Fatalf("patches %+v", p)
	}
}

// TestDrainSkipsAStaleList proves a first list older than Drain's own
// patch (an API server may serve it from a lagging watch cache) is neither
// taken for a readmit nor for a finished drain: Drain goes on waiting for
// the router.
func TestDrainSkipsAStaleList(t *testing.T) {
	e := tt.New(t)
	// The view before the patch: gpu0 admitting and not quiesced.
	e.ServeStaleListOnce(e.Tier(t, "llama"))
	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	stop := e.FakeRouter(t, release, draining)
	defer stop()
	type result struct {
		msg string
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, msg, err := newClient(e, false).Drain(context.Background(), "llama", "gpu0", time.Minute)
		done <- result{msg, err}
	}()
	tt.WaitFor(t, draining, "the router's report of Draining")
	tt.WaitFor(t, e.Watching, "drain's watch")
	close(release)
	if r := tt.WaitFor(t, done, "drain"); r.err != nil || r.msg != "replicatier.sluice.dev/llama member gpu0 drained" {
		t.Fatalf("drain after a stale list: %v %q", r.err, r.msg)
	}
	if e.StaleListPending() {
		t.Fatal("drain never listed the tier")
	}
}

// TestDrainTimesOutWithTheState proves a drain whose context ends first
// fails with ErrDrainTimeout saying what it last saw: first a router that
// has not applied the patch's generation, then a member still Draining.
func TestDrainTimesOutWithTheState(t *testing.T) {
	e := tt.New(t)
	drain := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		_, _, err := newClient(e, false).Drain(ctx, "llama", "gpu0", drainTimeout)
		return err
	}
	err := drain()
	if !errors.Is(err, transition.ErrDrainTimeout) ||
		err.Error() != "drain timed out after 300ms: replicatier.sluice.dev/llama member gpu0: the router on gpu-node-1 applies generation 3 of 4" {
		t.Fatalf("err = %v, want ErrDrainTimeout naming the applied generation", err)
	}
	cur := e.Tier(t, "llama")
	cur.Status.Router.AppliedGeneration = cur.Generation
	cur.Status.Members[0].Phase = v1alpha1.MemberDraining
	if err := e.Base.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	err = drain()
	if !errors.Is(err, transition.ErrDrainTimeout) || !strings.HasSuffix(err.Error(), ": gpu0 Draining") {
		t.Fatalf("err = %v, want ErrDrainTimeout naming gpu0's phase", err)
	}
	if p := e.TakePatches(); len(p) != 1 {
		t.Fatalf("patches %+v, want only the first drain's", p)
	}
}

// TestDrainFailsWhenReadmitted proves a scope readmitted while Drain waits
// ends the wait with ErrReadmitted, not a timeout.
func TestDrainFailsWhenReadmitted(t *testing.T) {
	e := tt.New(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := newClient(e, false).Drain(context.Background(), "llama", "gpu0", time.Minute)
		done <- err
	}()
	tt.WaitFor(t, e.Watching, "drain's watch")
	if _, _, err := (&transition.Client{Client: e.Base, Namespace: tt.Namespace}).Readmit(context.Background(), "llama", "gpu0"); err != nil {
		t.Fatal(err)
	}
	err := tt.WaitFor(t, done, "drain's return after the readmit")
	if !errors.Is(err, transition.ErrReadmitted) || err.Error() != "readmitted while draining: replicatier.sluice.dev/llama member gpu0" {
		t.Fatalf("err = %v, want ErrReadmitted", err)
	}
}

// TestDrainAlreadyDrained returns at once for a scope already quiesced and
// drained, sending nothing.
func TestDrainAlreadyDrained(t *testing.T) {
	e := tt.New(t)
	_, msg, err := newClient(e, false).Drain(context.Background(), "llama", "gpu1", time.Minute)
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu1 drained" {
		t.Fatalf("%v %q", err, msg)
	}
	if p := e.TakePatches(); len(p) != 0 {
		t.Fatalf("patches %+v", p)
	}
}

func TestDrained(t *testing.T) {
	e := tt.New(t)
	llama := e.Tier(t, "llama")
	if transition.Drained(llama, "gpu0") || !transition.Drained(llama, "gpu1") || transition.Drained(llama, "") {
		t.Fatal("llama: gpu1 alone is drained")
	}
	llama.Generation++
	if transition.Drained(llama, "gpu1") {
		t.Fatal("drained for a generation the router does not apply")
	}
	if transition.Drained(e.Tier(t, "embed"), "") {
		t.Fatal("drained with no router report")
	}
}

func TestNewStatus(t *testing.T) {
	e := tt.New(t)
	s := transition.NewStatus(e.Tier(t, "llama"), "")
	if s.Namespace != tt.Namespace || s.Name != "llama" || s.Node != "gpu-node-1" || s.Strategy != "Capacity" ||
		s.Generation != 3 || s.ObservedGeneration != 3 || *s.AppliedGeneration != 3 || s.RouterNode != "gpu-node-1" ||
		s.Accepted != "True" || s.Programmed != "True" || s.Ready != "Unknown" || s.TierQuiesce != "" || len(s.Members) != 2 ||
		s.Members[0].ID != "gpu0" || s.Members[0].Quiesce != "" || !*s.Members[0].Ready || s.Members[0].Phase != "Admitting" ||
		s.Members[1].ID != "gpu1" || s.Members[1].Quiesce != "maintenance" || s.Members[1].Phase != "Drained" {
		t.Fatalf("llama status = %+v", s)
	}
	if s := transition.NewStatus(e.Tier(t, "llama"), "gpu1"); len(s.Members) != 1 || s.Members[0].ID != "gpu1" {
		t.Fatalf("llama gpu1 status = %+v", s)
	}
	s = transition.NewStatus(e.Tier(t, "embed"), "")
	if s.Strategy != "Direct" || s.AppliedGeneration != nil || s.RouterNode != "" || s.Accepted != "Unknown" ||
		len(s.Members) != 1 || s.Members[0].Ready != nil || s.Members[0].Phase != "" || s.Queue != nil {
		t.Fatalf("embed status = %+v", s)
	}
}

// TestNewStatusQueue proves the queue is the router's report when there is
// one, the spec's bound with nothing reported before the router reports,
// and absent for a tier with no queue.
func TestNewStatusQueue(t *testing.T) {
	e := tt.New(t)
	llama := e.Tier(t, "llama")
	n := func(i int32) *int32 { return &i }
	if got, want := transition.NewStatus(llama, ""), (&transition.QueueStatus{MaxRequests: 64, Waiting: n(3), OldestWaitSeconds: n(12)}); !reflect.DeepEqual(got.Queue, want) {
		t.Fatalf("reported queue = %+v, want %+v", got.Queue, want)
	}
	if got := transition.NewStatus(llama, "gpu1").Queue; got == nil || got.String() != "3/64 waiting, oldest 12s" {
		t.Fatalf("a member's status: queue %v", got)
	}
	// The router reports the bound it applies, which may lag the spec.
	llama.Spec.Queue.MaxRequests = 128
	if got := transition.NewStatus(llama, "").Queue; got.MaxRequests != 64 {
		t.Fatalf("queue = %+v, want the router's bound 64", got)
	}
	llama.Status.Queue = nil
	if got, want := transition.NewStatus(llama, "").Queue, (&transition.QueueStatus{MaxRequests: 128}); !reflect.DeepEqual(got, want) ||
		got.String() != "-/128 waiting, oldest -" {
		t.Fatalf("unreported queue = %+v (%v), want %+v", got, got, want)
	}
	llama.Spec.Queue = nil
	if got := transition.NewStatus(llama, "").Queue; got != nil {
		t.Fatalf("a tier without a queue shows %+v", got)
	}
}

// TestDrainWithReason proves the reason given quiesces an admitting scope,
// a quiesced scope keeps its own, and a malformed one is refused before
// any request.
func TestDrainWithReason(t *testing.T) {
	e := tt.New(t)
	c := newClient(e, true)
	_, msg, err := c.DrainWithReason(context.Background(), "llama", "gpu0", "driver-update", time.Minute)
	if err != nil || msg != "replicatier.sluice.dev/llama member gpu0 quiesced (driver-update); not waiting for the drain (server dry run)" {
		t.Fatalf("%v %q", err, msg)
	}
	if p := e.TakePatches(); len(p) != 1 || p[0].Body != `{"spec":{"quiesce":{"members":{"gpu0":"driver-update"}}}}` || !p[0].DryRun {
		t.Fatalf("patches %+v", p)
	}
	_, msg, err = c.DrainWithReason(context.Background(), "llama", "gpu1", "driver-update", time.Minute)
	if err != nil || !strings.Contains(msg, "already quiesced (maintenance)") || len(e.TakePatches()) != 0 {
		t.Fatalf("%v %q", err, msg)
	}
	_, _, err = c.DrainWithReason(context.Background(), "nope", "", "Bad Reason", time.Minute)
	if !errors.Is(err, transition.ErrInvalidReason) {
		t.Fatalf("err = %v, want ErrInvalidReason before the tier is read", err)
	}
}

func TestList(t *testing.T) {
	e := tt.New(t)
	c := newClient(e, false)
	tiers, truncated, err := c.List(context.Background(), 10)
	if err != nil || truncated || len(tiers) != 2 {
		t.Fatalf("List(10) = %d tiers, truncated %v, %v", len(tiers), truncated, err)
	}
	tiers, truncated, err = c.List(context.Background(), 1)
	if err != nil || !truncated || len(tiers) != 1 {
		t.Fatalf("List(1) = %d tiers, truncated %v, %v", len(tiers), truncated, err)
	}
	c.Namespace = "other"
	if tiers, _, err := c.List(context.Background(), 10); err != nil || len(tiers) != 0 {
		t.Fatalf("List in another namespace = %d tiers, %v", len(tiers), err)
	}
}
