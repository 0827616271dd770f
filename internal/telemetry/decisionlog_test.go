package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-dev/sluice/internal/evidence"
)

type fixedDrops evidence.SinkDrops

func (d fixedDrops) Drops() evidence.SinkDrops { return evidence.SinkDrops(d) }

type fixedSchedulerDrops uint64

func (d fixedSchedulerDrops) DroppedSchedulerPayloads() uint64 { return uint64(d) }

func TestDecisionLogCollector(t *testing.T) {
	c := NewDecisionLogCollector(fixedDrops{QueueFull: 3, WriteError: 1}, fixedSchedulerDrops(2))
	want := `
# HELP sluice_decision_log_dropped_total Decision records the JSONL file sink did not write, by reason (queue_full, write_error, closed).
# TYPE sluice_decision_log_dropped_total counter
sluice_decision_log_dropped_total{reason="closed"} 0
sluice_decision_log_dropped_total{reason="queue_full"} 3
sluice_decision_log_dropped_total{reason="write_error"} 1
# HELP sluice_decision_scheduler_evidence_dropped_total Scheduler payloads dropped as invalid before a decision record was stored; the rest of each record was kept.
# TYPE sluice_decision_scheduler_evidence_dropped_total counter
sluice_decision_scheduler_evidence_dropped_total 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(NewDecisionLogCollector(nil, nil)); n != 0 {
		t.Fatalf("%d series without sources", n)
	}
}
