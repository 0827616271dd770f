package evidence

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// queuedRecords are one record per way a request leaves its tier's
// admission queue, as the router writes them.
func queuedRecords(t *testing.T) map[QueueOutcome]Record {
	t.Helper()
	admitted := capacityRecord(t)
	admitted.RequestID, admitted.Queue, admitted.Queued = "req-queued-admitted", QueueAdmitted, 750*time.Millisecond
	notAdmitted := func(id, code string, status int, q QueueOutcome, wait time.Duration) Record {
		r := notAdmittedRecord()
		r.RequestID, r.Code, r.Status, r.Queue, r.Queued, r.Duration = id, code, status, q, wait, wait+time.Millisecond
		return r
	}
	return map[QueueOutcome]Record{
		QueueAdmitted:   admitted,
		QueueTimeout:    notAdmitted("req-queue-timeout", CodeQueueTimeout, 503, QueueTimeout, 30*time.Second),
		QueueFull:       notAdmitted("req-queue-full", CodeQueueFull, 429, QueueFull, 0),
		QueueClientGone: notAdmitted("req-queue-gone", CodeClientGone, 499, QueueClientGone, 2*time.Second),
		QueueRefused:    notAdmitted("req-queue-refused", CodeRouterHandedOver, 503, QueueRefused, 40*time.Millisecond),
	}
}

// TestQueueOutcomesCovered checks the fixtures cover the closed set.
func TestQueueOutcomesCovered(t *testing.T) {
	records := queuedRecords(t)
	for _, q := range QueueOutcomes {
		if _, ok := records[q]; !ok {
			t.Errorf("no fixture for queue outcome %s", q)
		}
	}
}

// TestQueueLine checks the line of a request that met the queue: the line
// it had without a queue plus exactly " queue=OUTCOME queued=WAIT", the
// same as slog's TextHandler renders AppendAttrs, and never more than
// LineAttrs attributes.
func TestQueueLine(t *testing.T) {
	for q, r := range queuedRecords(t) {
		without := r
		without.Queue, without.Queued = "", 0
		want := without.String() + " queue=" + string(q) + " queued=" + r.Queued.String()
		if got := r.String(); got != want {
			t.Errorf("%s: line\n got %s\nwant %s", q, got, want)
		}
		if got, want := r.String(), textLine(t, r.AppendAttrs(nil)...); got != want {
			t.Errorf("%s: line differs from the TextHandler's\n got %s\nwant %s", q, got, want)
		}
	}
	everything := capacityRecord(t)
	everything.End, everything.Status, everything.Ejection, everything.Protocol = StreamUpstreamUnavailable, 502, EjectionRefused, ProtocolHeadTooLarge
	everything.Queue, everything.Queued = QueueAdmitted, time.Millisecond
	if n := len(everything.AppendAttrs(nil)); n != LineAttrs {
		t.Errorf("a record with every optional attribute has %d attributes, want LineAttrs = %d", n, LineAttrs)
	}
}

// TestWithoutQueueUnchanged checks that a tier without a queue writes what
// it wrote before queues existed: the legacy access line and JSON without
// the queue keys, even when the router's wait is non-zero by mistake, and
// that an outcome outside the closed set is left out on every surface.
func TestWithoutQueueUnchanged(t *testing.T) {
	for _, r := range []Record{withoutScheduler(capacityRecord(t)), roundRobinRecord(), notAdmittedRecord(), refusedRecord()} {
		for _, q := range []QueueOutcome{"", "lost"} {
			r.Queue, r.Queued = q, time.Second
			if got, want := r.String(), legacyLine(t, r); got != want {
				t.Errorf("%s queue %q: line\n got %s\nwant %s", r.RequestID, q, got, want)
			}
			data := string(mustJSON(t, r))
			if strings.Contains(data, `"queue`) {
				t.Errorf("%s queue %q: JSON %s has a queue key", r.RequestID, q, data)
			}
		}
	}
}

// TestQueueRoundTrip checks that ParseRecord reads back every queued
// record exactly, with its wait in whole microseconds.
func TestQueueRoundTrip(t *testing.T) {
	for q, r := range queuedRecords(t) {
		m := asMap(t, mustJSON(t, r))
		if m[keyQueue] != string(q) || m[keyQueuedUS] != float64(r.Queued.Microseconds()) {
			t.Errorf("%s: JSON queue %v queued_us %v", q, m[keyQueue], m[keyQueuedUS])
		}
		got, err := ParseRecord(mustJSON(t, r))
		if err != nil {
			t.Fatalf("%s: ParseRecord: %v", q, err)
		}
		if !sameRecord(got, r) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", q, got, r)
		}
	}
}

// TestParseRecordQueueConsistency checks the queue fields' rules: both
// keys or neither, a known outcome, a wait within the request, and the
// outcome, code and status agreeing as the router writes them.
func TestParseRecordQueueConsistency(t *testing.T) {
	records := queuedRecords(t)
	tests := map[string]struct {
		r      Record
		mutate func(m map[string]any)
	}{
		"queue without queued_us":    {records[QueueTimeout], func(m map[string]any) { delete(m, keyQueuedUS) }},
		"queued_us without queue":    {records[QueueTimeout], func(m map[string]any) { delete(m, keyQueue) }},
		"unknown outcome":            {records[QueueTimeout], func(m map[string]any) { m[keyQueue] = "lost" }},
		"outcome not a string":       {records[QueueTimeout], func(m map[string]any) { m[keyQueue] = 1 }},
		"null wait":                  {records[QueueTimeout], func(m map[string]any) { m[keyQueuedUS] = nil }},
		"negative wait":              {records[QueueTimeout], func(m map[string]any) { m[keyQueuedUS] = -1 }},
		"fractional wait":            {records[QueueTimeout], func(m map[string]any) { m[keyQueuedUS] = 1.5 }},
		"wait longer than request":   {records[QueueTimeout], func(m map[string]any) { m[keyQueuedUS] = m["duration_us"].(float64) + 1 }},
		"wait above the bound":       {records[QueueTimeout], func(m map[string]any) { m[keyQueuedUS] = maxDurationUS + 1 }},
		"timeout answered 429":       {records[QueueTimeout], func(m map[string]any) { m["status"] = 429 }},
		"full answered 503":          {records[QueueFull], func(m map[string]any) { m["status"] = 503 }},
		"client gone answered 503":   {records[QueueClientGone], func(m map[string]any) { m["status"] = 503 }},
		"handed over answered 429":   {records[QueueRefused], func(m map[string]any) { m["status"] = 429 }},
		"timeout code, full outcome": {records[QueueTimeout], func(m map[string]any) { m[keyQueue] = string(QueueFull) }},
		"queue code without a queue": {records[QueueFull], func(m map[string]any) { delete(m, keyQueue); delete(m, keyQueuedUS) }},
		"handed over, not queued":    {records[QueueRefused], func(m map[string]any) { delete(m, keyQueue); delete(m, keyQueuedUS) }},
		"capacity with timeout":      {records[QueueTimeout], func(m map[string]any) { m["refusal_reason"] = CodeCapacityExhausted }},
		"admitted out of the queue":  {records[QueueAdmitted], func(m map[string]any) { m[keyQueue] = string(QueueTimeout) }},
		"not admitted, admitted":     {records[QueueTimeout], func(m map[string]any) { m[keyQueue] = string(QueueAdmitted) }},
		"gate refusal with a queue": {refusedRecord(), func(m map[string]any) {
			m[keyQueue], m[keyQueuedUS] = string(QueueRefused), 0
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m := asMap(t, mustJSON(t, tt.r))
			tt.mutate(m)
			data, _ := json.Marshal(m)
			if _, err := ParseRecord(data); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("ParseRecord(%s) err = %v, want ErrInvalidRecord", data, err)
			}
		})
	}
	// An admission refusal while queued (the tier quiesced) is accepted.
	quiesced := records[QueueRefused]
	quiesced.Code = CodeTierQuiesced
	if got, err := ParseRecord(mustJSON(t, quiesced)); err != nil || !sameRecord(got, quiesced) {
		t.Errorf("quiesced while queued: %+v, %v", got, err)
	}
}
