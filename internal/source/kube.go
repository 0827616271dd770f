package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Reconnect backoff of the kube source's list and watch.
const (
	// ReconnectBackoffInitial is the first wait after a failed list or
	// watch: a restarted API server is usually back within a second.
	ReconnectBackoffInitial = 500 * time.Millisecond
	// ReconnectBackoffMax caps the wait between attempts while the API
	// server is down: a recovered server is noticed within 10 s, and a down
	// one sees at most one list per router (one per node) every 10 s.
	ReconnectBackoffMax = 10 * time.Second
)

// KubeOptions configures a Kube source.
type KubeOptions struct {
	// NodeName is this router's node; tiers of other nodes are ignored even
	// if the lister-watcher returns them. Required.
	NodeName string
	// ListerWatcher lists and watches the ReplicaTiers of NodeName;
	// NewTierListerWatcher builds the API server's. Required.
	ListerWatcher cache.ListerWatcherWithContext
	// Clock drives the reconnect backoff. Its zero value (nil) is the real
	// clock.
	Clock clock.Clock
	// Logger receives connection transitions and the list-and-watch
	// machinery's own logs. Nil discards them.
	Logger *slog.Logger
}

// Kube is the kube source: it lists and watches the ReplicaTiers of one node
// and publishes a Snapshot whenever the set of versions to serve changes.
// A tier is applied only at a generation the manager accepted, with the
// quiesce intent of status.admission; a tier whose newest generation is not
// accepted (yet) keeps its last applied version; while the API server is
// unreachable the last published Snapshot stays in force, and after a
// reconnect the source relists. Create it with NewKube and start it with
// Run; it is not safe to Run twice.
type Kube struct {
	lw    *connectionLog
	clock clock.Clock
	log   *slog.Logger
	store *tierStore
	tiers *kubeTiers // touched only by Run.
}

// NewKube returns a Kube source for opts. It returns an error wrapping
// ErrInvalidOptions when NodeName or ListerWatcher is missing. It contacts
// nothing yet.
func NewKube(opts KubeOptions) (*Kube, error) {
	if opts.NodeName == "" || opts.ListerWatcher == nil {
		return nil, fmt.Errorf("%w: a node name and a lister-watcher are required", ErrInvalidOptions)
	}
	k := &Kube{
		clock: opts.Clock,
		log:   opts.Logger,
		store: newTierStore(),
		tiers: newKubeTiers(opts.NodeName),
	}
	if k.clock == nil {
		k.clock = clock.RealClock{}
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.lw = &connectionLog{lw: opts.ListerWatcher, log: k.log}
	return k, nil
}

// Run lists the node's tiers, publishes the first Snapshot once the list
// succeeded, and then publishes a new Snapshot whenever a watch event or a
// relist changes what is served (status-only changes, such as the router's
// own status writes, publish nothing). publish is called from Run's
// goroutine, one call at a time; it must not block for long. Until the
// first list succeeds nothing is published. Run returns nil when ctx ends,
// after its list-and-watch goroutine stopped.
func (k *Kube) Run(ctx context.Context, publish func(Snapshot)) error {
	ctx, cancel := context.WithCancel(ctx)
	logger := logr.FromSlogHandler(k.log.Handler())
	steps := int(math.Ceil(float64(ReconnectBackoffMax) / float64(ReconnectBackoffInitial)))
	r := cache.NewReflectorWithOptions(k.lw, &v1alpha1.ReplicaTier{}, k.store, cache.ReflectorOptions{
		Name:    "sluice-router-replicatiers",
		Logger:  &logger,
		Clock:   k.clock,
		Backoff: &wait.Backoff{Duration: ReconnectBackoffInitial, Cap: ReconnectBackoffMax, Steps: steps, Factor: 2, Jitter: 0.5},
	})
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { r.RunWithContext(klog.NewContext(ctx, logger)) })

	var last *Snapshot
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.store.changed:
		}
		objs, synced := k.store.list()
		if !synced {
			continue
		}
		s := k.tiers.update(objs)
		if last != nil && equality.Semantic.DeepEqual(*last, s) {
			continue
		}
		publish(s)
		last = &s
	}
}

// tierStore is the reflector's store: the latest ReplicaTiers of the watch,
// keyed by namespace/name. Every change signals changed (capacity one, so
// bursts coalesce). The objects are never modified.
type tierStore struct {
	mu      sync.Mutex
	objs    map[string]*v1alpha1.ReplicaTier
	synced  bool // a list (Replace) completed.
	changed chan struct{}
}

func newTierStore() *tierStore {
	return &tierStore{objs: map[string]*v1alpha1.ReplicaTier{}, changed: make(chan struct{}, 1)}
}

// list returns the current objects and whether a list completed.
func (s *tierStore) list() ([]*v1alpha1.ReplicaTier, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*v1alpha1.ReplicaTier, 0, len(s.objs))
	for _, o := range s.objs {
		out = append(out, o)
	}
	return out, s.synced
}

func (s *tierStore) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *tierStore) put(obj any) error {
	t, ok := obj.(*v1alpha1.ReplicaTier)
	if !ok {
		return fmt.Errorf("source: unexpected watch object %T", obj)
	}
	s.mu.Lock()
	s.objs[t.Namespace+"/"+t.Name] = t
	s.mu.Unlock()
	s.signal()
	return nil
}

// Add stores a listed or watched tier.
func (s *tierStore) Add(obj any) error { return s.put(obj) }

// Update stores a changed tier.
func (s *tierStore) Update(obj any) error { return s.put(obj) }

// Delete forgets a tier.
func (s *tierStore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(*v1alpha1.ReplicaTier)
	if !ok {
		return fmt.Errorf("source: unexpected watch object %T", obj)
	}
	s.mu.Lock()
	delete(s.objs, t.Namespace+"/"+t.Name)
	s.mu.Unlock()
	s.signal()
	return nil
}

// Replace installs the result of a (re)list: tiers deleted while the watch
// was down disappear here.
func (s *tierStore) Replace(list []any, _ string) error {
	objs := make(map[string]*v1alpha1.ReplicaTier, len(list))
	for _, obj := range list {
		t, ok := obj.(*v1alpha1.ReplicaTier)
		if !ok {
			return fmt.Errorf("source: unexpected list object %T", obj)
		}
		objs[t.Namespace+"/"+t.Name] = t
	}
	s.mu.Lock()
	s.objs, s.synced = objs, true
	s.mu.Unlock()
	s.signal()
	return nil
}

// Resync does nothing: the source keeps no derived state to refresh.
func (s *tierStore) Resync() error { return nil }

// connectionLog wraps the lister-watcher. It logs when the API server
// becomes unreachable and when a list succeeds again, once per transition,
// and it makes the reflector relist after an outage: the first watch that
// starts after a failed list or watch is refused as expired, so the store is
// replaced with the server's complete current view instead of resuming from
// a resource version. It also opts out of watch-list (streaming) requests:
// a router lists at most a few hundred small objects, and a plain list keeps
// the relist explicit.
type connectionLog struct {
	lw  cache.ListerWatcherWithContext
	log *slog.Logger

	mu   sync.Mutex
	down bool
}

// ListWithContext lists through the wrapped lister-watcher.
func (c *connectionLog) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := c.lw.ListWithContext(ctx, opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil && !c.down:
		c.down = true
		c.log.Warn("cannot list ReplicaTiers; serving the last applied configuration", "error", withoutURL(err))
	case err == nil && c.down:
		c.down = false
		c.log.Info("ReplicaTiers relisted after reconnecting to the API server")
	}
	return obj, err
}

// WatchWithContext watches through the wrapped lister-watcher.
func (c *connectionLog) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := c.lw.WatchWithContext(ctx, opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil && !c.down && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err):
		c.down = true
		c.log.Warn("cannot watch ReplicaTiers; serving the last applied configuration", "error", withoutURL(err))
	case err == nil && c.down:
		w.Stop()
		return nil, apierrors.NewResourceExpired("sluice: relisting after reconnecting to the API server")
	}
	return w, err
}

// IsWatchListSemanticsUnSupported opts out of watch-list requests (see
// connectionLog).
func (c *connectionLog) IsWatchListSemanticsUnSupported() bool { return true }

// List lists without a context; the reflector calls ListWithContext.
func (c *connectionLog) List(opts metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), opts)
}

// Watch watches without a context; the reflector calls WatchWithContext.
func (c *connectionLog) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), opts)
}

// withoutURL returns an error's text without the request URL client-go
// puts in transport errors: logs name causes, not addresses.
func withoutURL(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Op + ": " + u.Err.Error()
	}
	return err.Error()
}
