package evidence

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// update rewrites the golden files: go test ./internal/evidence -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
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
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

// start is the fixed request time of the test records.
var start = time.Date(2025, 3, 4, 5, 6, 7, 890123000, time.UTC)

// decision ranks three members: gpu0 fresh at 250000 ppm with 1/4 active,
// gpu1 stale with 0/4 active, gpu2 unknown at 3/4; gpu3 is not eligible.
// gpu1 wins on the local ratio although its telemetry is not fresh.
func decision(t testing.TB) *scheduler.Decision {
	t.Helper()
	stale := scheduler.Pressure{Freshness: scheduler.FreshnessStale, RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}
	d, err := scheduler.Rank([]string{"gpu0", "gpu1", "gpu2", "gpu3"}, 1, []scheduler.Candidate{
		{MemberID: "gpu0", Eligible: true, Active: 1, Capacity: 4, Pressure: scheduler.Pressure{
			Freshness: scheduler.FreshnessFresh, PPM: 250_000, RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		{MemberID: "gpu1", Eligible: true, Active: 0, Capacity: 4, Pressure: stale},
		{MemberID: "gpu2", Eligible: true, Active: 3, Capacity: 4, Pressure: scheduler.UnknownPressure()},
		{MemberID: "gpu3", Eligible: false, Active: 0, Capacity: 4, Pressure: scheduler.UnknownPressure()},
	})
	if err != nil || d.SelectedMemberID != "gpu1" {
		t.Fatalf("Rank = %+v, %v", d, err)
	}
	return &d
}

// capacityRecord is an admitted Capacity record with a valid payload.
func capacityRecord(t testing.TB) Record {
	return Record{
		RequestID: "req-capacity-1",
		Time:      start,
		Duration:  1500 * time.Millisecond,
		Alias:     "chat",
		Tier:      "inference/llama-70b",
		Outcome:   OutcomeAdmitted,
		Status:    200,
		Member:    "gpu1",
		Dispatch:  120 * time.Microsecond,
		FirstByte: 300 * time.Millisecond,
		End:       StreamComplete,
		Scheduler: decision(t),
	}
}

// roundRobinRecord is an admitted RoundRobin record: no payload.
func roundRobinRecord() Record {
	return Record{
		RequestID: "req-rr-1", Time: start, Duration: 2 * time.Millisecond, Alias: "rr", Tier: "inference/rr",
		Outcome: OutcomeAdmitted, Status: 502, Code: CodeUpstreamUnavailable, Member: "gpu0",
		Dispatch: 50 * time.Microsecond, End: StreamUpstreamUnavailable,
	}
}

// notAdmittedRecord is an admission refusal: no payload, no attempt.
func notAdmittedRecord() Record {
	return Record{
		RequestID: "req-full-1", Time: start, Duration: 40 * time.Microsecond, Alias: "chat", Tier: "inference/llama-70b",
		Outcome: OutcomeNotAdmitted, Code: CodeCapacityExhausted, Status: 503,
	}
}

// refusedRecord is a gate refusal.
func refusedRecord() Record {
	return Record{
		RequestID: "req-gate-1", Time: start, Duration: 10 * time.Microsecond,
		Outcome: OutcomeRefused, Code: CodeModelNotFound, Status: 404,
	}
}

// withoutScheduler returns r without its payload.
func withoutScheduler(r Record) Record {
	r.Scheduler = nil
	return r
}

// mustJSON encodes r.
func mustJSON(t testing.TB, r Record) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// asMap decodes JSON into generic maps, for mutation.
func asMap(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// sameRecord compares two records field by field, times by Equal and the
// payload by value.
func sameRecord(a, b Record) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	da, db := a.Scheduler, b.Scheduler
	a.Scheduler, b.Scheduler = nil, nil
	if a != b || (da == nil) != (db == nil) {
		return false
	}
	if da == nil {
		return true
	}
	ja, _ := json.Marshal(schedulerWire(da))
	jb, _ := json.Marshal(schedulerWire(db))
	return string(ja) == string(jb)
}

// bytesReader reads data.
func bytesReader(data []byte) *bytes.Reader { return bytes.NewReader(data) }

// readFile reads a file the test wrote.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path) //nolint:gosec // A file in the test's temporary directory.
	if err != nil {
		t.Fatal(err)
	}
	return data
}
