package telemetry

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
)

// capacityNames are the metrics of the capacity collector.
var capacityNames = []string{nameTierActive, nameTierMax, nameMemberActive, nameMemberMax, nameMemberReady,
	nameMemberPPM, nameMemberFreshness, namePressureAge, nameQueueWaiting, nameQueueMax, nameQueueOldestWait}

// t0 is the fake clock's start.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// goldenRouter is a router with a Capacity tier whose four members are in
// the four freshness classes (gpu3 not ready, without metrics), and a
// RoundRobin tier without a tier ceiling and with one unbounded member.
func goldenRouter(t *testing.T) (*router.Router, *adminserver.Admin, *tierstest.Pressure) {
	t.Helper()
	ready := &fakeReadiness{notReady: map[string]bool{"ns/llama#gpu3": true}}
	press := &tierstest.Pressure{}
	rt := router.New(router.Options{Readiness: ready, Pressure: press})
	t.Cleanup(rt.Close)
	snap := source.Snapshot{Tiers: []source.Tier{
		tier("ns/llama", v1alpha1.StrategyCapacity, 12,
			member{"gpu0", "http://127.0.0.1:8001", 4, "vllm"},
			member{"gpu1", "http://127.0.0.1:8002", 4, "vllm"},
			member{"gpu2", "http://127.0.0.1:8003", 4, "sglang"},
			member{"gpu3", "http://127.0.0.1:8004", 4, ""}),
		tier("ns/rr", v1alpha1.StrategyRoundRobin, 0,
			member{"a", "http://127.0.0.1:8101", 0, ""},
			member{"b", "http://127.0.0.1:8102", 2, ""}),
	}}
	ready.register(snap)
	rt.Tiers().Apply(snap)
	press.Set("ns/llama", map[string]scheduler.Pressure{
		"gpu0": freshPressure, "gpu1": stalePressure, "gpu2": failedPressure, "gpu3": unknownPressure,
	})
	return rt, adminserver.New(rt.Tiers(), adminserver.Options{}), press
}

// TestCapacityGolden pins the scrape-time gauges of a tier with members in
// all four freshness classes: one-hot freshness, a PPM only for the fresh
// member, ages only for fetched members, and no ceiling series where there
// is no ceiling.
func TestCapacityGolden(t *testing.T) {
	rt, admin, press := goldenRouter(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	fetches := NewFetchMetrics(clk)
	collect := fetches.Wrap(&fakeCollector{})
	targets := rt.Tiers().MetricsTargets("ns/llama")
	if len(targets) != 3 {
		t.Fatalf("targets %v, want the three members with metrics", targets)
	}
	_, _ = collect.Collect(context.Background(), targets["gpu0"])
	clk.SetTime(t0.Add(1500 * time.Millisecond))
	_, _ = collect.Collect(context.Background(), targets["gpu1"])
	clk.SetTime(t0.Add(4 * time.Second))

	c := NewCapacityCollector(CapacityOptions{Source: admin, Targets: rt.Tiers(), Fetches: fetches, Clock: clk})
	got, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, capacityNames...)
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, "capacity.golden", got)
	if err := testutil.CollectAndCompare(c, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if n := press.Snapshots.Load(); n != 0 {
		t.Fatalf("a scrape called Snapshot %d times; only Peek is allowed", n)
	}
	if n := press.Peeks.Load(); n != 2 {
		t.Fatalf("two scrapes made %d Peeks, want one per Capacity tier per scrape", n)
	}
}

// TestCapacityLintClean runs promlint over the collector's output.
func TestCapacityLintClean(t *testing.T) {
	_, admin, _ := goldenRouter(t)
	problems, err := testutil.CollectAndLint(NewCapacityCollector(CapacityOptions{Source: admin}))
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
