package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

// failSafe bounds every wait on an event; it is a deadline for a broken
// test, never the way a test waits.
const failSafe = 20 * time.Second

// patchRecord is one patch the fake API received.
type patchRecord struct {
	patchType types.PatchType
	body      string
	dryRun    bool
}

// env is a fake API holding two tiers in namespace inference: llama (two
// members, gpu1 quiesced, with router status) and embed (a direct tier).
type env struct {
	// c is the command's client; base is the same store without c's
	// interceptors, for the fake router.
	c, base client.WithWatch
	// watching receives once each time the command's watch is registered:
	// the fake store replays nothing from before that, unlike an API server.
	watching chan struct{}
	mu       sync.Mutex
	patches  []patchRecord
	// staleList, when set, answers the next list of tiers in place of the
	// store, as an API server's lagging watch cache may.
	staleList *v1alpha1.ReplicaTier
}

func newEnv(t *testing.T) *env {
	t.Helper()
	llama := validationtable.Base()
	llama.Namespace, llama.Name, llama.Generation = "inference", "llama", 3
	llama.Spec.Quiesce = &v1alpha1.QuiesceSpec{Tier: "", Members: map[string]v1alpha1.QuiesceReason{"gpu1": "maintenance"}}
	llama.Status = v1alpha1.ReplicaTierStatus{
		ObservedGeneration: 3,
		Conditions: []metav1.Condition{
			{Type: "Accepted", Status: "True", Reason: "Accepted", LastTransitionTime: metav1.Now()},
			{Type: "Programmed", Status: "True", Reason: "Applied", LastTransitionTime: metav1.Now()},
		},
		Router: &v1alpha1.RouterStatus{Node: "gpu-node-1", AppliedGeneration: 3},
		Members: []v1alpha1.MemberStatus{
			{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting},
			{ID: "gpu1", Ready: true, Phase: v1alpha1.MemberDrained},
		},
	}
	embed := validationtable.Base()
	embed.Namespace, embed.Name = "inference", "embed"
	embed.Spec.Strategy = ""
	embed.Spec.Members = embed.Spec.Members[:1]

	e := &env{watching: make(chan struct{}, 8)}
	e.base = fake.NewClientBuilder().
		WithScheme(newScheme()).
		WithObjects(llama, embed).
		WithStatusSubresource(&v1alpha1.ReplicaTier{}).
		Build()
	e.c = interceptor.NewClient(e.base, interceptor.Funcs{
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			w, err := c.Watch(ctx, list, opts...)
			if err == nil {
				e.watching <- struct{}{}
			}
			return w, err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			body, err := patch.Data(obj)
			if err != nil {
				return err
			}
			po := &client.PatchOptions{}
			po.ApplyOptions(opts)
			e.mu.Lock()
			e.patches = append(e.patches, patchRecord{patchType: patch.Type(), body: string(body), dryRun: len(po.DryRun) > 0})
			e.mu.Unlock()
			if len(po.DryRun) > 0 {
				return c.Patch(ctx, obj, patch, opts...)
			}
			// Store the patched spec and a raised generation in one
			// write, as the API server does.
			cur := &v1alpha1.ReplicaTier{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return err
			}
			orig, err := json.Marshal(cur)
			if err != nil {
				return err
			}
			merged, err := jsonpatch.MergePatch(orig, body)
			if err != nil {
				return err
			}
			next := obj.(*v1alpha1.ReplicaTier)
			*next = v1alpha1.ReplicaTier{}
			if err := json.Unmarshal(merged, next); err != nil {
				return err
			}
			obj.SetGeneration(cur.Generation + 1)
			return c.Update(ctx, obj)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			e.mu.Lock()
			stale := e.staleList
			e.staleList = nil
			e.mu.Unlock()
			if l, ok := list.(*v1alpha1.ReplicaTierList); ok && stale != nil {
				l.ResourceVersion = stale.ResourceVersion
				l.Items = []v1alpha1.ReplicaTier{*stale.DeepCopy()}
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	return e
}

// run runs the command line args and returns stdout and the error.
func (e *env) run(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := newCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		func() (client.WithWatch, string, error) { return e.c, "inference", nil })
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func (e *env) takePatches() []patchRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.patches
	e.patches = nil
	return p
}

func (e *env) tier(t *testing.T, name string) *v1alpha1.ReplicaTier {
	t.Helper()
	tier := &v1alpha1.ReplicaTier{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "inference", Name: name}, tier); err != nil {
		t.Fatal(err)
	}
	return tier
}

func TestStatusTable(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("status", "llama")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`inference/llama +gpu-node-1 +Capacity +3 +3 +True +True +Unknown +-`,
		`gpu0 +true +Admitting +-`,
		`gpu1 +true +Drained +maintenance`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	out, err = e.run("status", "llama", "--member", "gpu1")
	if err != nil || strings.Contains(out, "gpu0") || !strings.Contains(out, "gpu1") {
		t.Fatalf("status --member gpu1: %v\n%s", err, out)
	}
}

func TestStatusJSON(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("status", "embed", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s TierStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s.Name != "embed" || s.Strategy != "Direct" || s.AppliedGeneration != nil || s.Accepted != "Unknown" ||
		len(s.Members) != 1 || s.Members[0].Ready != nil || s.Members[0].Phase != "" {
		t.Fatalf("status = %+v", s)
	}
}

func TestChecksBeforeAnyChange(t *testing.T) {
	tests := []struct {
		desc    string
		args    []string
		wantErr error
		wantMsg string
	}{
		{desc: "unknown member quiesce", args: []string{"quiesce", "llama", "--member", "gpu7", "--reason", "x"}, wantErr: ErrUnknownMember, wantMsg: "members: gpu0, gpu1"},
		{desc: "unknown member readmit", args: []string{"readmit", "llama", "--member", "gpu7"}, wantErr: ErrUnknownMember},
		{desc: "unknown member drain", args: []string{"drain", "llama", "--member", "gpu7"}, wantErr: ErrUnknownMember},
		{desc: "unknown member status", args: []string{"status", "llama", "--member", "gpu7"}, wantErr: ErrUnknownMember},
		{desc: "direct tier member quiesce", args: []string{"quiesce", "embed", "--member", "gpu0", "--reason", "x"}, wantErr: ErrDirectTier, wantMsg: "omit --member"},
		{desc: "direct tier member readmit", args: []string{"readmit", "embed", "--member", "gpu0"}, wantErr: ErrDirectTier},
		{desc: "direct tier member drain", args: []string{"drain", "embed", "--member", "gpu0"}, wantErr: ErrDirectTier},
		{desc: "bad reason", args: []string{"quiesce", "llama", "--reason", "Not OK"}, wantErr: ErrInvalidReason},
		{desc: "unknown tier", args: []string{"quiesce", "nope", "--reason", "x"}, wantErr: ErrTierNotFound},
		{desc: "member without tier", args: []string{"readmit", "--member", "gpu0"}, wantMsg: "--member needs its TIER"},
		{desc: "no tier", args: []string{"status"}, wantMsg: "a TIER argument is required"},
		{desc: "missing reason", args: []string{"quiesce", "llama"}, wantMsg: `"reason" not set`},
		{desc: "bad output", args: []string{"status", "llama", "-o", "yaml"}, wantMsg: "--output must be"},
		{desc: "bad dry run", args: []string{"readmit", "llama", "--dry-run", "client"}, wantMsg: "--dry-run must be"},
		{desc: "bad timeout", args: []string{"drain", "llama", "--timeout", "0s"}, wantMsg: "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.run(tt.args...)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if p := e.takePatches(); len(p) != 0 {
				t.Fatalf("patches sent despite the error: %+v", p)
			}
		})
	}
}

// TestScopesAreIndependent proves each verb patches exactly its scope's key
// with a JSON merge patch, so member and tier intent never touch each other.
func TestScopesAreIndependent(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		args      []string
		wantPatch string
		wantTier  string
		wantGPU0  string
		wantGPU1  string
	}{
		{[]string{"quiesce", "llama", "--reason", "upgrade"}, `{"spec":{"quiesce":{"tier":"upgrade"}}}`, "upgrade", "", "maintenance"},
		{[]string{"readmit", "llama", "--member", "gpu1"}, `{"spec":{"quiesce":{"members":{"gpu1":null}}}}`, "upgrade", "", ""},
		{[]string{"quiesce", "llama", "--member", "gpu0", "--reason", "driver"}, `{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}`, "upgrade", "driver", ""},
		{[]string{"readmit", "llama"}, `{"spec":{"quiesce":{"tier":null}}}`, "", "driver", ""},
	}
	for _, s := range steps {
		if _, err := e.run(s.args...); err != nil {
			t.Fatalf("%v: %v", s.args, err)
		}
		p := e.takePatches()
		if len(p) != 1 || p[0].patchType != types.MergePatchType || p[0].body != s.wantPatch || p[0].dryRun {
			t.Fatalf("%v: patches %+v, want one merge patch %s", s.args, p, s.wantPatch)
		}
		cur := e.tier(t, "llama")
		if intent(cur, "") != s.wantTier || intent(cur, "gpu0") != s.wantGPU0 || intent(cur, "gpu1") != s.wantGPU1 {
			t.Fatalf("%v: intent tier=%q gpu0=%q gpu1=%q", s.args, intent(cur, ""), intent(cur, "gpu0"), intent(cur, "gpu1"))
		}
	}
	// Asking again for what is already so sends nothing.
	out, err := e.run("quiesce", "llama", "--member", "gpu0", "--reason", "driver")
	if err != nil || !strings.Contains(out, "already quiesced") || len(e.takePatches()) != 0 {
		t.Fatalf("repeat quiesce: %v %q", err, out)
	}
	out, err = e.run("readmit", "llama")
	if err != nil || !strings.Contains(out, "already admitting") || len(e.takePatches()) != 0 {
		t.Fatalf("repeat readmit: %v %q", err, out)
	}
}

func TestDryRunServer(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("quiesce", "llama", "--member", "gpu0", "--reason", "driver", "--dry-run=server")
	if err != nil || !strings.Contains(out, "(server dry run)") {
		t.Fatalf("%v %q", err, out)
	}
	if p := e.takePatches(); len(p) != 1 || !p[0].dryRun {
		t.Fatalf("patches %+v, want one dry run", p)
	}
	if intent(e.tier(t, "llama"), "gpu0") != "" {
		t.Fatal("a dry run changed the tier")
	}
	// drain --dry-run sends the quiesce as a dry run and does not wait.
	out, err = e.run("drain", "llama", "--member", "gpu0", "--dry-run=server")
	if err != nil || !strings.Contains(out, "not waiting") {
		t.Fatalf("drain dry run: %v %q", err, out)
	}
	if p := e.takePatches(); len(p) != 1 || !p[0].dryRun || p[0].body != `{"spec":{"quiesce":{"members":{"gpu0":"drain"}}}}` {
		t.Fatalf("patches %+v", p)
	}
}

// fakeRouter plays the router on the tier's node: whenever the tier's
// gpu0 is quiesced it reports gpu0 Draining, then (once release is closed)
// Drained, for the tier's current generation.
func fakeRouter(t *testing.T, e *env, release <-chan struct{}, reportedDraining chan<- struct{}) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.base.Watch(ctx, &v1alpha1.ReplicaTierList{}, client.InNamespace("inference"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				cur, _ := ev.Object.(*v1alpha1.ReplicaTier)
				if cur == nil || cur.Name != "llama" || intent(cur, "gpu0") == "" || cur.Status.Members[0].Phase != v1alpha1.MemberAdmitting {
					continue
				}
				cur = e.tierCtx(ctx, t)
				cur.Status.Router.AppliedGeneration = cur.Generation
				cur.Status.Members[0].Phase = v1alpha1.MemberDraining
				if err := e.base.Status().Update(ctx, cur); err != nil {
					t.Error(err)
					return
				}
				reportedDraining <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return
				}
				cur = e.tierCtx(ctx, t)
				cur.Status.Members[0].Phase = v1alpha1.MemberDrained
				if err := e.base.Status().Update(ctx, cur); err != nil {
					t.Error(err)
				}
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (e *env) tierCtx(ctx context.Context, t *testing.T) *v1alpha1.ReplicaTier {
	tier := &v1alpha1.ReplicaTier{}
	if err := e.base.Get(ctx, types.NamespacedName{Namespace: "inference", Name: "llama"}, tier); err != nil {
		t.Error(err)
	}
	return tier
}

// TestDrainWaitsForTheRouter proves drain quiesces the member and returns
// only once the router reports it Drained for the current generation, not
// while it is Draining.
func TestDrainWaitsForTheRouter(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	stop := fakeRouter(t, e, release, draining)
	defer stop()

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.run("drain", "llama", "--member", "gpu0", "-o", "json")
		done <- result{out, err}
	}()
	waitFor(t, draining, "the router's report of Draining")
	waitFor(t, e.watching, "drain's watch")
	select {
	case r := <-done:
		t.Fatalf("drain returned while the member was Draining: %+v", r)
	default:
	}
	close(release)
	var r result
	select {
	case r = <-done:
	case <-time.After(failSafe):
		t.Fatal("drain did not return after Drained")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	var s TierStatus
	if err := json.Unmarshal([]byte(r.out), &s); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if len(s.Members) != 1 || s.Members[0].Phase != "Drained" || s.Members[0].Quiesce != DefaultDrainReason ||
		*s.AppliedGeneration != s.Generation {
		t.Fatalf("final status %+v", s)
	}
	if p := e.takePatches(); len(p) != 1 || p[0].body != `{"spec":{"quiesce":{"members":{"gpu0":"drain"}}}}` {
		t.Fatalf("patches %+v", p)
	}
}

// TestDrainSkipsAStaleList proves a first list older than drain's own patch
// (an API server may serve it from a lagging watch cache) is neither taken
// for a readmit nor for a finished drain: drain goes on waiting for the
// router.
func TestDrainSkipsAStaleList(t *testing.T) {
	e := newEnv(t)
	// The view before the patch: gpu0 admitting and not quiesced.
	e.staleList = e.tier(t, "llama")
	release := make(chan struct{})
	draining := make(chan struct{}, 1)
	stop := fakeRouter(t, e, release, draining)
	defer stop()
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = e.run("drain", "llama", "--member", "gpu0")
		done <- err
	}()
	waitFor(t, draining, "the router's report of Draining")
	waitFor(t, e.watching, "drain's watch")
	close(release)
	if err := waitFor(t, done, "drain"); err != nil || !strings.Contains(out, "member gpu0 drained") {
		t.Fatalf("drain after a stale list: %v %q", err, out)
	}
	if e.staleList != nil {
		t.Fatal("drain never listed the tier")
	}
}

// waitFor receives from ch, failing the test after failSafe.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failSafe):
		t.Fatalf("no %s after %v", what, failSafe)
		panic("unreachable")
	}
}

// TestDrainTimesOutWithTheState proves a drain that does not finish in
// --timeout fails with ErrDrainTimeout saying what it last saw: first a
// router that has not applied the patch's generation, then a member still
// Draining.
func TestDrainTimesOutWithTheState(t *testing.T) {
	e := newEnv(t)
	_, err := e.run("drain", "llama", "--member", "gpu0", "--timeout", "300ms")
	if !errors.Is(err, ErrDrainTimeout) || !strings.Contains(err.Error(), "the router on gpu-node-1 applies generation 3 of 4") {
		t.Fatalf("err = %v, want ErrDrainTimeout naming the applied generation", err)
	}
	cur := e.tier(t, "llama")
	cur.Status.Router.AppliedGeneration = cur.Generation
	cur.Status.Members[0].Phase = v1alpha1.MemberDraining
	if err := e.c.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	_, err = e.run("drain", "llama", "--member", "gpu0", "--timeout", "300ms")
	if !errors.Is(err, ErrDrainTimeout) || !strings.Contains(err.Error(), "gpu0 Draining") {
		t.Fatalf("err = %v, want ErrDrainTimeout naming gpu0's phase", err)
	}
	if p := e.takePatches(); len(p) != 1 {
		t.Fatalf("patches %+v, want only the first drain's", p)
	}
}

// TestDrainAlreadyDrained returns at once for a scope already quiesced and
// drained, sending nothing.
func TestDrainAlreadyDrained(t *testing.T) {
	e := newEnv(t)
	out, err := e.run("drain", "llama", "--member", "gpu1")
	if err != nil || !strings.Contains(out, "member gpu1 drained") {
		t.Fatalf("%v %q", err, out)
	}
	if p := e.takePatches(); len(p) != 0 {
		t.Fatalf("patches %+v", p)
	}
}
