package evidence

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// legacyLine renders the router's access line as it was before scheduler
// evidence existed: these nine attributes, in this order, with a
// TextHandler, without time, level and message.
func legacyLine(t *testing.T, r Record) string {
	t.Helper()
	return textLine(t,
		slog.String("request_id", r.RequestID),
		slog.String("tier", r.Tier),
		slog.String("member", r.Member),
		slog.String("result", string(r.Outcome)),
		slog.String("code", r.Code),
		slog.Int("status", r.Status),
		slog.String("end", string(r.End)),
		slog.Duration("duration", r.Duration),
		slog.Duration("first_byte", r.FirstByte),
	)
}

// textLine renders attributes with slog's TextHandler, without time, level
// and message and without the newline.
func textLine(t *testing.T, attrs ...slog.Attr) string {
	t.Helper()
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch a.Key {
		case slog.TimeKey, slog.LevelKey, slog.MessageKey:
			return slog.Attr{}
		}
		return a
	}})
	slog.New(h).LogAttrs(context.Background(), slog.LevelInfo, "", attrs...)
	return strings.TrimSuffix(buf.String(), "\n")
}

// TestLineFormat checks the one-line format: byte-identical to the legacy
// access line for every record without a valid payload, and the legacy
// line plus exactly the three replica pairs for a valid one.
func TestLineFormat(t *testing.T) {
	capacity := capacityRecord(t)
	for _, r := range []Record{roundRobinRecord(), notAdmittedRecord(), refusedRecord(), withoutScheduler(capacity)} {
		if got, want := r.String(), legacyLine(t, r); got != want {
			t.Errorf("%s: line\n got %s\nwant %s", r.RequestID, got, want)
		}
	}
	want := legacyLine(t, capacity) + " replica_scheduler=capacity replica_scheduler_reason=selected replica_eligible_count=3"
	if got := capacity.String(); got != want {
		t.Errorf("capacity line\n got %s\nwant %s", got, want)
	}
	if strings.Contains(capacity.String(), "gpu0") || strings.Contains(capacity.String(), "250000") {
		t.Errorf("score rows leaked into the line: %s", capacity.String())
	}
	for name, mutate := range invalidPayloads() {
		r := capacityRecord(t)
		mutate(&r)
		if got, want := r.String(), legacyLine(t, withoutScheduler(r)); got != want {
			t.Errorf("%s: an invalid payload changed the line\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestLineMatchesTextHandler checks AppendLine against slog's TextHandler
// rendering of AppendAttrs, including values slog quotes, so the access
// line a router logs with a TextHandler is this line.
func TestLineMatchesTextHandler(t *testing.T) {
	records := []Record{capacityRecord(t), roundRobinRecord(), notAdmittedRecord(), refusedRecord(), {}}
	odd := capacityRecord(t)
	odd.Scheduler = nil
	for _, s := range []string{"a b", "a=b", `a"b`, "tab\there", "é", "\u00a0nbsp", "ctl\x01", "back\\slash", "\xff"} {
		odd.Tier, odd.Alias = s, s
		records = append(records, odd)
	}
	for _, r := range records {
		if got, want := r.String(), textLine(t, r.AppendAttrs(nil)...); got != want {
			t.Errorf("line\n got %s\nwant %s", got, want)
		}
	}
}

// TestLineDurations pins the duration rendering.
func TestLineDurations(t *testing.T) {
	r := refusedRecord()
	r.Duration = 1500 * time.Microsecond
	if got := r.String(); !strings.Contains(got, " duration=1.5ms first_byte=0s") {
		t.Fatalf("line %s", got)
	}
}
