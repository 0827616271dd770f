package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/source"
)

// TestRequestMetricsQueue proves the queue's per-request metrics: every
// served tier exports its outcome counters (one per queue outcome) and its
// wait histogram at zero right after Configure; a request that met the
// queue counts its outcome and, unless it was refused queue_full on
// arrival, observes its wait; a request that never met the queue counts
// nowhere; a removed tier's series go.
func TestRequestMetricsQueue(t *testing.T) {
	m := NewRequestMetrics()
	m.Configure(source.Snapshot{Tiers: []source.Tier{
		tier("ns/q", v1alpha1.StrategyRoundRobin, 0, member{"gpu0", "http://127.0.0.1:8001", 1, ""}, member{"gpu1", "http://127.0.0.1:8002", 1, ""}),
		tier("ns/plain", v1alpha1.StrategyRoundRobin, 0, member{"gpu2", "http://127.0.0.1:8003", 1, ""}),
	}})
	outcomes := seriesOf(t, m, nameQueueOutcomes)
	if len(outcomes) != 2*len(evidence.QueueOutcomes) {
		t.Fatalf("queue outcomes %v, want %d zero series per tier", outcomes, len(evidence.QueueOutcomes))
	}
	for _, tierKey := range []string{"ns/q", "ns/plain"} {
		for _, q := range evidence.QueueOutcomes {
			if v, ok := outcomes[tierKey+"//"+string(q)]; !ok || v != 0 {
				t.Errorf("%s %s = %v (exported %v), want 0", tierKey, q, v, ok)
			}
		}
	}
	if waits := seriesOf(t, m, nameQueueWait); len(waits) != 2 || waits["ns/q//"] != 0 || waits["ns/plain//"] != 0 {
		t.Fatalf("queue waits %v, want an empty histogram per tier", waits)
	}

	admitted := router.Outcome{Tier: "ns/q", Alias: "q", Result: router.ResultAdmitted, Member: "gpu0", Status: 200,
		End: router.EndComplete, Duration: 3 * time.Second, Queue: router.QueueAdmitted, Queued: 2 * time.Second}
	m.Record(admitted)
	m.Record(router.Outcome{Tier: "ns/q", Alias: "q", Result: router.ResultNotAdmitted, Status: 429,
		Code: "queue_full", Queue: router.QueueFull})
	m.Record(router.Outcome{Tier: "ns/q", Alias: "q", Result: router.ResultNotAdmitted, Status: 503,
		Code: "queue_timeout", Queue: router.QueueTimeout, Queued: time.Minute})
	m.Record(router.Outcome{Tier: "ns/plain", Alias: "plain", Result: router.ResultAdmitted, Member: "gpu2", Status: 200,
		End: router.EndComplete})
	outcomes = seriesOf(t, m, nameQueueOutcomes)
	for labels, want := range map[string]float64{
		"ns/q//admitted": 1, "ns/q//queue_full": 1, "ns/q//queue_timeout": 1, "ns/q//client_gone": 0, "ns/q//refused": 0,
		"ns/plain//admitted": 0,
	} {
		if outcomes[labels] != want {
			t.Errorf("%s%s = %v, want %v", nameQueueOutcomes, labels, outcomes[labels], want)
		}
	}
	if waits := seriesOf(t, m, nameQueueWait); waits["ns/q//"] != 2 || waits["ns/plain//"] != 0 {
		t.Fatalf("queue waits %v, want the admitted and the timed-out requests' waits only", waits)
	}
	want := `# HELP sluice_queue_wait_seconds Time requests waited in the tier's admission queue, however they left it (a request refused queue_full on arrival did not wait and is not observed), in seconds.
# TYPE sluice_queue_wait_seconds histogram
`
	buckets := map[string]string{"1": "0", "2.5": "1", "30": "1", "60": "2", "600": "2", "+Inf": "2"}
	got, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, nameQueueWait)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), want) {
		t.Fatalf("exposition:\n%s", got)
	}
	for le, n := range buckets {
		if line := `sluice_queue_wait_seconds_bucket{tier="ns/q",le="` + le + `"} ` + n + "\n"; !strings.Contains(string(got), line) {
			t.Errorf("no %q in\n%s", line, got)
		}
	}
	if !strings.Contains(string(got), `sluice_queue_wait_seconds_bucket{tier="ns/q",le="0.001"} 0`) {
		t.Errorf("the first bucket is not 1 ms:\n%s", got)
	}

	m.Configure(source.Snapshot{Tiers: []source.Tier{
		tier("ns/plain", v1alpha1.StrategyRoundRobin, 0, member{"gpu2", "http://127.0.0.1:8003", 1, ""}),
	}})
	for _, name := range []string{nameQueueOutcomes, nameQueueWait} {
		for labels := range seriesOf(t, m, name) {
			if strings.HasPrefix(labels, "ns/q/") {
				t.Errorf("%s%s still exported after the tier was removed", name, labels)
			}
		}
	}
	// A removed tier's late request counts afresh.
	m.Record(admitted)
	if got := seriesOf(t, m, nameQueueOutcomes); got["ns/q//admitted"] != 1 {
		t.Fatalf("late queued request: %v", got)
	}
}

// viewSource is a CapacitySource returning a fixed view.
type viewSource adminapi.CapacityView

// Capacity implements CapacitySource.
func (v viewSource) Capacity() adminapi.CapacityView { return adminapi.CapacityView(v) }

// TestCapacityQueueGauges pins the queue gauges: depth and oldest wait for
// every tier (0 without a queue), the bound only where there is a queue.
func TestCapacityQueueGauges(t *testing.T) {
	five := 5
	c := NewCapacityCollector(CapacityOptions{Source: viewSource{Tiers: []adminapi.TierCapacity{
		{Tier: "ns/plain", Strategy: "Direct", Members: []adminapi.MemberCapacity{}},
		{Tier: "ns/q", Strategy: "Direct", Members: []adminapi.MemberCapacity{},
			Queue: adminapi.TierQueue{MaxRequests: &five, Waiting: 3, OldestWaitMillis: 2500}},
	}}})
	want := `# HELP sluice_queue_max_requests Bound of the tier's admission queue (spec.queue.maxRequests); absent when the tier has no queue.
# TYPE sluice_queue_max_requests gauge
sluice_queue_max_requests{tier="ns/q"} 5
# HELP sluice_queue_oldest_wait_seconds Seconds the longest-waiting request of the tier's admission queue has waited, whole milliseconds; 0 when none waits.
# TYPE sluice_queue_oldest_wait_seconds gauge
sluice_queue_oldest_wait_seconds{tier="ns/plain"} 0
sluice_queue_oldest_wait_seconds{tier="ns/q"} 2.5
# HELP sluice_queue_waiting_requests Requests waiting in the tier's admission queue; 0 for a tier without a queue.
# TYPE sluice_queue_waiting_requests gauge
sluice_queue_waiting_requests{tier="ns/plain"} 0
sluice_queue_waiting_requests{tier="ns/q"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), nameQueueMax, nameQueueOldestWait, nameQueueWaiting); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
