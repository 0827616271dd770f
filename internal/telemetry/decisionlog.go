package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/evidence"
)

// SinkDropSource reports the records a decision log sink did not write;
// evidence.FileSink implements it.
type SinkDropSource interface {
	// Drops returns the drop counts.
	Drops() evidence.SinkDrops
}

// SchedulerDropSource reports the scheduler payloads the decision log
// dropped as invalid; evidence.Log implements it.
type SchedulerDropSource interface {
	// DroppedSchedulerPayloads returns the count.
	DroppedSchedulerPayloads() uint64
}

// The reason label values of sluice_decision_log_dropped_total.
const (
	// DropQueueFull counts records dropped because the sink's queue was
	// full.
	DropQueueFull = "queue_full"
	// DropWriteError counts records the sink failed to write.
	DropWriteError = "write_error"
	// DropClosed counts records that arrived after the sink closed.
	DropClosed = "closed"
)

// DecisionLogCollector is the prometheus.Collector of the decision log's
// counters, read at scrape time: sluice_decision_log_dropped_total{reason}
// (records the JSONL sink did not write) and
// sluice_decision_scheduler_evidence_dropped_total (scheduler payloads
// dropped as invalid before storage).
type DecisionLogCollector struct {
	sink      SinkDropSource
	log       SchedulerDropSource
	dropped   *prometheus.Desc
	scheduler *prometheus.Desc
}

// NewDecisionLogCollector returns the collector. A nil sink leaves
// sluice_decision_log_dropped_total out; a nil log leaves the scheduler
// evidence counter out.
func NewDecisionLogCollector(sink SinkDropSource, log SchedulerDropSource) *DecisionLogCollector {
	return &DecisionLogCollector{
		sink: sink,
		log:  log,
		dropped: prometheus.NewDesc(nameDecisionLogDropped,
			"Decision records the JSONL file sink did not write, by reason (queue_full, write_error, closed).",
			[]string{labelReason}, nil),
		scheduler: prometheus.NewDesc(nameSchedulerEvidenceDropped,
			"Scheduler payloads dropped as invalid before a decision record was stored; the rest of each record was kept.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DecisionLogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dropped
	ch <- c.scheduler
}

// Collect implements prometheus.Collector.
func (c *DecisionLogCollector) Collect(ch chan<- prometheus.Metric) {
	if c.sink != nil {
		d := c.sink.Drops()
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(d.QueueFull), DropQueueFull)
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(d.WriteError), DropWriteError)
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(d.Closed), DropClosed)
	}
	if c.log != nil {
		ch <- prometheus.MustNewConstMetric(c.scheduler, prometheus.CounterValue, float64(c.log.DroppedSchedulerPayloads()))
	}
}
