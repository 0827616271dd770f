package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport builds a report from in-memory results with a leak, an
// overshoot and a duplicate, and checks the invariants, the summary line and
// the JSON file.
func TestReport(t *testing.T) {
	o := options{minRequests: 2, minFaults: 1, killExcessMax: 0, slack: resourceSlack{Goroutines: 5, FDs: 5, RSSKiB: 1024}}
	records := []requestRecord{
		{ID: "a", Outcome: outcomeOK, Member: "gpu0", Fault: faultStallIdle},
		{ID: "b", Outcome: outcomeErrorPrefix + "capacity_exhausted"},
	}
	logs := map[string][]engineRecord{
		"gpu0": {{ID: "a", T: ms(100), Live: 5}},
		"gpu1": {{ID: "a", T: ms(100), Live: 1}},
	}
	faults := faultCounts(map[string]int{chaosKill: 2}, records, map[string]bool{"a": true})
	rep := &report{
		Requests:     len(records),
		Outcomes:     checkOutcomes(records, nil, map[string]bool{"a": true}, nil),
		Faults:       faults,
		FaultClasses: classify(faults),
		Overshoot:    checkOvershoot(logs, history(), admitSlack, nil, false),
		Duplicates:   checkDuplicates(logs),
		LeakedLeases: []string{"soak/chaos member gpu0 holds 1"},
		Kills:        []killResult{{Excess: 3}},
		KillExcess:   3,
		Drains:       map[string]int{"ok": 2},
		Baseline:     resources{Goroutines: 10, FDs: 10, RSSKiB: 1000},
		Final:        resources{Goroutines: 11, FDs: 10, RSSKiB: 1500},
		RouterPanics: []string{"boom"},
	}
	rep.Invariants = evaluate(rep, o, requestRecord{Outcome: outcomeOK}, nil)
	want := []string{invLeases, invOvershoot, invDuplicates, invPanics, invFaults, invKillExcess}
	if got := rep.failed(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("failed invariants %v, want %v", got, want)
	}
	if rep.FaultClasses["stall"] != 1 || rep.FaultClasses["engine_kill"] != 2 || rep.FaultClasses["drain"] != 0 {
		t.Fatalf("fault classes %v", rep.FaultClasses)
	}
	line := rep.summary()
	for _, part := range []string{"soak FAIL(", "leaked=1", "overshoot=1", "duplicates=1", "kill_excess=3/1",
		"fds=10->10", "goroutines=10->11", "error:capacity_exhausted=1", "engine_kill=2"} {
		if !strings.Contains(line, part) {
			t.Errorf("summary %q lacks %q", line, part)
		}
	}
	if strings.Contains(line, "\n") {
		t.Fatalf("summary is not one line: %q", line)
	}

	path := filepath.Join(t.TempDir(), "sub", "report.json")
	if err := rep.write(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path) //nolint:gosec // the test's own file.
	if err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Overshoot.Violations != 1 || back.Duplicates.Duplicates != 1 || len(back.LeakedLeases) != 1 {
		t.Fatalf("report read back: %+v", back)
	}

	// The same run without the faults passes every invariant but the
	// fault count, which it has too few of.
	clean := &report{Requests: 2, Outcomes: rep.Outcomes, Faults: faults, FaultClasses: rep.FaultClasses,
		Drains: map[string]int{"ok": 1}, Baseline: rep.Baseline, Final: rep.Baseline}
	clean.Invariants = evaluate(clean, o, requestRecord{Outcome: outcomeOK}, nil)
	if got := clean.failed(); len(got) != 1 || got[0] != invFaults {
		t.Fatalf("clean run failed %v, want only %s", got, invFaults)
	}
}

func TestWriteRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	if err := writeRecords(path, []requestRecord{{ID: "a", Outcome: outcomeOK}, {ID: "b", Outcome: outcomeAborted}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path) //nolint:gosec // the test's own file.
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `"id":"b"`) {
		t.Fatalf("records file %q", raw)
	}
}
