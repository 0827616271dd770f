package telemetry

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
)

// update rewrites the golden files: go test ./internal/telemetry -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// failSafe bounds every wait of a test on an event; it is a deadline for a
// broken test, never the way a test waits for something.
const failSafe = 20 * time.Second

// golden returns testdata/name, first rewriting it with got under -update.
func golden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path) //nolint:gosec // A fixed test fixture.
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	return want
}

// member describes one member of a test tier.
type member struct {
	id       string
	endpoint string
	max      int32  // 0: no ceiling.
	engine   string // "": no metrics.
}

// tier builds a defaulted source tier key ("ns/name").
func tier(key string, strategy v1alpha1.Strategy, tierMax int32, members ...member) source.Tier {
	ns, name, _ := strings.Cut(key, "/")
	spec := v1alpha1.ReplicaTierSpec{NodeName: "gpu-node-1", Aliases: []string{name}, ServedModel: "served/model", Strategy: strategy}
	if tierMax > 0 {
		spec.MaxConcurrency = &tierMax
	}
	for _, m := range members {
		mb := v1alpha1.Member{ID: m.id, Endpoint: m.endpoint}
		if m.max > 0 {
			mb.MaxConcurrency = &m.max
		}
		if m.engine != "" {
			mb.Metrics = &v1alpha1.MetricsSpec{Engine: v1alpha1.Engine(m.engine)}
		}
		spec.Members = append(spec.Members, mb)
	}
	rt := v1alpha1.ReplicaTier{Spec: spec}
	v1alpha1.Default(&rt)
	return source.Tier{Key: key, Namespace: ns, Name: name, File: name + ".yaml", Spec: rt.Spec}
}

// fakeReadiness is a tiers.ReadinessView the test controls; members not
// set are ready.
type fakeReadiness struct {
	mu       sync.Mutex
	notReady map[string]bool // "tier#member"
	tiers    map[string][]string
}

var errUnknownTier = errors.New("fake: unknown tier")

func (f *fakeReadiness) Ready(tier string) (map[string]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids, ok := f.tiers[tier]
	if !ok {
		return nil, errUnknownTier
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = !f.notReady[tier+"#"+id]
	}
	return out, nil
}

// register makes the snapshot's members known.
func (f *fakeReadiness) register(s source.Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tiers = map[string][]string{}
	for _, t := range s.Tiers {
		for _, m := range t.Spec.Members {
			f.tiers[t.Key] = append(f.tiers[t.Key], m.ID)
		}
	}
}

// The four freshness classes as the pressure cache reports them.
var (
	freshPressure   = scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 250_000, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}
	stalePressure   = scheduler.Pressure{Freshness: scheduler.FreshnessStale, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}
	failedPressure  = scheduler.Pressure{Freshness: scheduler.FreshnessFailed, RequestState: scheduler.SignalMissing, KVState: scheduler.SignalMissing}
	unknownPressure = scheduler.UnknownPressure()
)

// fakeCollector is a pressure.Collector returning a fixed result and
// counting its calls.
type fakeCollector struct {
	calls  atomic.Int64
	err    error
	called chan struct{} // when set before the cache runs, signalled per call.
}

func (c *fakeCollector) Collect(context.Context, pressure.Target) (scheduler.Telemetry, error) {
	c.calls.Add(1)
	if c.called != nil {
		c.called <- struct{}{}
	}
	one := 1.0
	return scheduler.Telemetry{Running: &one, Waiting: &one}, c.err
}
