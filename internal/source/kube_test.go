package source

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// failSafe bounds every wait on an event; it is a deadline for a broken
// test, never the way a test waits.
const failSafe = 20 * time.Second

// errAPIDown is what the fake API answers while it is down.
var errAPIDown = errors.New("connection refused")

// fakeAPI is an in-memory API server for the kube source: it lists, serves
// one watch at a time, and can go down. Every list attempt is reported on
// lists, every watch it opens on watches.
type fakeAPI struct {
	mu      sync.Mutex
	rv      int
	objs    map[string]*v1alpha1.ReplicaTier
	w       *watch.RaceFreeFakeWatcher
	down    bool
	lists   chan error
	watches chan struct{}
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{objs: map[string]*v1alpha1.ReplicaTier{}, lists: make(chan error, 64), watches: make(chan struct{}, 64)}
}

func (f *fakeAPI) ListWithContext(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		f.lists <- errAPIDown
		return nil, errAPIDown
	}
	list := &v1alpha1.ReplicaTierList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(f.rv)}}
	for _, key := range slicesSorted(f.objs) {
		list.Items = append(list.Items, *f.objs[key].DeepCopy())
	}
	f.lists <- nil
	return list, nil
}

func (f *fakeAPI) WatchWithContext(_ context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errAPIDown
	}
	if f.w != nil {
		f.w.Stop()
	}
	f.w = watch.NewRaceFreeFake()
	f.watches <- struct{}{}
	return f.w, nil
}

// set creates or updates a tier and sends the watch event.
func (f *fakeAPI) set(t *v1alpha1.ReplicaTier) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	t = t.DeepCopy()
	t.ResourceVersion = strconv.Itoa(f.rv)
	key := t.Namespace + "/" + t.Name
	_, existed := f.objs[key]
	f.objs[key] = t
	if f.w == nil || f.down {
		return
	}
	if existed {
		f.w.Modify(t.DeepCopy())
	} else {
		f.w.Add(t.DeepCopy())
	}
}

// remove deletes a tier and sends the watch event.
func (f *fakeAPI) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	key := "inference/" + name
	t := f.objs[key]
	delete(f.objs, key)
	if f.w != nil && !f.down && t != nil {
		f.w.Delete(t.DeepCopy())
	}
}

// setDown takes the API down (closing the watch) or brings it back.
func (f *fakeAPI) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down && f.w != nil {
		f.w.Stop()
		f.w = nil
	}
}

func slicesSorted(m map[string]*v1alpha1.ReplicaTier) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// kubeHarness runs a Kube source against a fakeAPI.
type kubeHarness struct {
	t         *testing.T
	api       *fakeAPI
	snapshots chan Snapshot
	done      chan error
	cancel    context.CancelFunc
}

func startKube(t *testing.T, api *fakeAPI) *kubeHarness {
	t.Helper()
	k, err := NewKube(KubeOptions{NodeName: "gpu-node-1", ListerWatcher: api})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &kubeHarness{t: t, api: api, snapshots: make(chan Snapshot, 16), done: make(chan error, 1), cancel: cancel}
	go func() { h.done <- k.Run(ctx, func(s Snapshot) { h.snapshots <- s }) }()
	t.Cleanup(h.stop)
	return h
}

// stop cancels Run and waits for it: the goroutine has an owner.
func (h *kubeHarness) stop() {
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run = %v", err)
		}
		h.done <- nil // let a second stop pass
	case <-time.After(failSafe):
		h.t.Fatal("Run did not return after cancel")
	}
}

func (h *kubeHarness) next() Snapshot {
	h.t.Helper()
	select {
	case s := <-h.snapshots:
		return s
	case <-time.After(failSafe):
		h.t.Fatal("no snapshot published")
	}
	return Snapshot{}
}

// nextList waits for the next list attempt and returns its error.
func (h *kubeHarness) nextList() error {
	h.t.Helper()
	select {
	case err := <-h.api.lists:
		return err
	case <-time.After(failSafe):
		h.t.Fatal("no list attempt")
	}
	return nil
}

// waitWatching waits until the fake API opened a watch for the source.
func (h *kubeHarness) waitWatching() {
	h.t.Helper()
	select {
	case <-h.api.watches:
	case <-time.After(failSafe):
		h.t.Fatal("no watch opened")
	}
}

func TestKubeRunPublishesAfterTheFirstList(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	api := newFakeAPI()
	api.set(kubeObj("a", 1, 0, "a"))
	pending := kubeObj("b", 1, 1, "b")
	pending.Status = v1alpha1.ReplicaTierStatus{}
	api.set(pending)
	h := startKube(t, api)
	if err := h.nextList(); err != nil {
		t.Fatal(err)
	}
	s := h.next()
	if served(s) != "a@1" || rejected(s) != "b:NotAccepted" {
		t.Fatalf("served %q rejected %q", served(s), rejected(s))
	}
	h.waitWatching()

	// The manager accepts b: published.
	api.set(kubeObj("b", 1, 1, "b"))
	if s = h.next(); served(s) != "a@1,b@1" {
		t.Fatalf("served %q", served(s))
	}

	// A status-only change (the router's own write) publishes nothing; the
	// next real change is the next snapshot.
	a := kubeObj("a", 1, 0, "a")
	a.Status.Members = []v1alpha1.MemberStatus{{ID: "gpu0", Ready: true, Phase: v1alpha1.MemberAdmitting}}
	api.set(a)
	a2 := kubeObj("a", 2, 0, "a")
	a2.Spec.Quiesce = &v1alpha1.QuiesceSpec{Members: map[string]v1alpha1.QuiesceReason{"gpu1": "maintenance"}}
	setAccepted(a2, "True", v1alpha1.ReasonAccepted)
	api.set(a2)
	s = h.next()
	if served(s) != "a@2,b@1" || s.Tiers[0].Spec.Quiesce.Members["gpu1"] != "maintenance" {
		t.Fatalf("served %q quiesce %+v", served(s), s.Tiers[0].Spec.Quiesce)
	}

	// A tier of another node is ignored even if the API sends it.
	far := kubeObj("far", 1, 2, "far")
	far.Spec.NodeName = "gpu-node-2"
	api.set(far)
	api.remove("b")
	if s = h.next(); served(s) != "a@2" {
		t.Fatalf("served %q", served(s))
	}
	h.stop()
}

func TestKubeRunPublishesNothingBeforeAList(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	api := newFakeAPI()
	api.set(kubeObj("a", 1, 0, "a"))
	api.setDown(true)
	h := startKube(t, api)
	for range 2 { // the first attempt and one retry after the backoff.
		if err := h.nextList(); err == nil {
			t.Fatal("list succeeded while down")
		}
	}
	select {
	case s := <-h.snapshots:
		t.Fatalf("published %+v before any list succeeded", s)
	default:
	}
	api.setDown(false)
	if s := h.next(); served(s) != "a@1" {
		t.Fatalf("served %q", served(s))
	}
	h.stop()
}

// TestKubeRunKeepsConfigThroughOutageAndRelists proves the last applied
// configuration stays in force while the API is down, and that the source
// relists after reconnecting: changes made during the outage, deletions
// included, arrive with the relist.
func TestKubeRunKeepsConfigThroughOutageAndRelists(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	api := newFakeAPI()
	api.set(kubeObj("a", 1, 0, "a"))
	api.set(kubeObj("b", 1, 1, "b"))
	h := startKube(t, api)
	if err := h.nextList(); err != nil {
		t.Fatal(err)
	}
	if s := h.next(); served(s) != "a@1,b@1" {
		t.Fatalf("served %q", served(s))
	}
	h.waitWatching()

	api.setDown(true)
	// Changes the source cannot see while down.
	api.set(kubeObj("a", 2, 0, "a", "renamed"))
	api.remove("b")
	// It keeps trying; nothing is published meanwhile.
	if err := h.nextList(); err == nil {
		t.Fatal("list succeeded while down")
	}
	select {
	case s := <-h.snapshots:
		t.Fatalf("published %+v while down", s)
	default:
	}

	api.setDown(false)
	for {
		if err := h.nextList(); err == nil {
			break
		}
	}
	s := h.next()
	if served(s) != "a@2" || !slices.Contains(s.Tiers[0].Spec.Aliases, "renamed") {
		t.Fatalf("after relist: served %q", served(s))
	}
	h.stop()
}

func TestNewKubeOptions(t *testing.T) {
	for _, opts := range []KubeOptions{{}, {NodeName: "n"}, {ListerWatcher: newFakeAPI()}} {
		if _, err := NewKube(opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("NewKube(%+v) = %v, want ErrInvalidOptions", opts, err)
		}
	}
}
