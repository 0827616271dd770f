package transitiontest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/api/v1alpha1/validationtable"
)

// Namespace is the namespace of the Env's tiers.
const Namespace = "inference"

// FailSafe bounds every wait on an event; it is a deadline for a broken
// test, never the way a test waits. Twenty seconds is far above what any
// wait takes on a loaded machine and short enough to fail a hung test.
const FailSafe = 20 * time.Second

// watchingBuffer is how many watch registrations Env.Watching holds
// unread: more than any one test makes.
const watchingBuffer = 8

// Patch is one patch the fake API server received.
type Patch struct {
	// Type is the patch's content type.
	Type types.PatchType
	// Body is the patch document.
	Body string
	// DryRun is true for a server-side dry run.
	DryRun bool
}

// Env is a fake API server holding two tiers in Namespace: llama (two
// members gpu0 and gpu1, gpu1 quiesced with reason maintenance and Drained,
// an admission queue of 64 where the router reports 3 requests waiting, the
// oldest for 12 s, generation 3 applied by the router on gpu-node-1) and
// embed (a direct tier, one member gpu0, no queue, no status). Real patches raise the generation as
// the API server does; dry runs store nothing; lists honour their limit.
type Env struct {
	// Client is the client under test: it records patches and signals
	// watches.
	Client client.WithWatch
	// Base is the same store without Client's interceptors, for fakes
	// playing other actors (the router).
	Base client.WithWatch
	// Watching receives once each time a watch through Client is
	// registered: the fake store replays nothing from before that, unlike
	// an API server.
	Watching chan struct{}

	mu      sync.Mutex
	patches []Patch
	// staleList, when set, answers the next list of tiers in place of the
	// store, as an API server's lagging watch cache may.
	staleList *v1alpha1.ReplicaTier
}

// Scheme returns a scheme knowing the ReplicaTier types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err) // unreachable: registering known types cannot fail.
	}
	return s
}

// New returns an Env with its two tiers.
func New(t testing.TB) *Env {
	t.Helper()
	llama := validationtable.Base()
	llama.Namespace, llama.Name, llama.Generation = Namespace, "llama", 3
	llama.Spec.Quiesce = &v1alpha1.QuiesceSpec{Tier: "", Members: map[string]v1alpha1.QuiesceReason{"gpu1": "maintenance"}}
	llama.Spec.Queue = &v1alpha1.QueueSpec{MaxRequests: 64, MaxWait: &metav1.Duration{Duration: 30 * time.Second}}
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
		Queue: &v1alpha1.QueueStatus{MaxRequests: 64, Waiting: 3, OldestWaitSeconds: 12},
	}
	embed := validationtable.Base()
	embed.Namespace, embed.Name = Namespace, "embed"
	embed.Spec.Strategy = ""
	embed.Spec.Members = embed.Spec.Members[:1]

	e := &Env{Watching: make(chan struct{}, watchingBuffer)}
	e.Base = fake.NewClientBuilder().
		WithScheme(Scheme()).
		WithObjects(llama, embed).
		WithStatusSubresource(&v1alpha1.ReplicaTier{}).
		Build()
	e.Client = interceptor.NewClient(e.Base, interceptor.Funcs{
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			w, err := c.Watch(ctx, list, opts...)
			if err == nil {
				e.Watching <- struct{}{}
			}
			return w, err
		},
		Patch: e.patch,
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
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			// Honour Limit as the API server does; the fake store
			// ignores it.
			lo := &client.ListOptions{}
			lo.ApplyOptions(opts)
			if l, ok := list.(*v1alpha1.ReplicaTierList); ok && lo.Limit > 0 && int64(len(l.Items)) > lo.Limit {
				l.Items, l.Continue = l.Items[:lo.Limit], "more"
			}
			return nil
		},
	})
	return e
}

// patch records the patch and applies it: a dry run through the fake
// store (which stores nothing), a real patch as the patched spec and a
// raised generation in one write, as the API server does.
func (e *Env) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	body, err := patch.Data(obj)
	if err != nil {
		return err
	}
	po := &client.PatchOptions{}
	po.ApplyOptions(opts)
	e.mu.Lock()
	e.patches = append(e.patches, Patch{Type: patch.Type(), Body: string(body), DryRun: len(po.DryRun) > 0})
	e.mu.Unlock()
	if len(po.DryRun) > 0 {
		return c.Patch(ctx, obj, patch, opts...)
	}
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
}

// TakePatches returns the patches received since the last call.
func (e *Env) TakePatches() []Patch {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.patches
	e.patches = nil
	return p
}

// ServeStaleListOnce makes the next list of tiers answer t in place of the
// store, as an API server's lagging watch cache may.
func (e *Env) ServeStaleListOnce(t *v1alpha1.ReplicaTier) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.staleList = t.DeepCopy()
}

// StaleListPending reports whether the stale list set by
// ServeStaleListOnce is still unserved.
func (e *Env) StaleListPending() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.staleList != nil
}

// Tier reads the tier name from the store, failing the test on error.
func (e *Env) Tier(t testing.TB, name string) *v1alpha1.ReplicaTier {
	t.Helper()
	tier := &v1alpha1.ReplicaTier{}
	if err := e.Base.Get(context.Background(), types.NamespacedName{Namespace: Namespace, Name: name}, tier); err != nil {
		t.Fatal(err)
	}
	return tier
}

// WaitFor receives from ch, failing the test after FailSafe.
func WaitFor[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(FailSafe):
		t.Fatalf("no %s after %v", what, FailSafe)
		panic("unreachable")
	}
}
