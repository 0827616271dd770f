package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/evidence"
)

// ms is a time in Unix nanoseconds, n milliseconds after zero.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// history is four epochs: gpu0 at ceiling 4 (written at 0, applied by
// 10 ms), then lowered to 2 (written at 1000 ms, applied by 1100 ms), then
// quiesced (written at 5000 ms, applied by 5100 ms), then readmitted
// (written at 6000 ms, applied by 6100 ms).
func history() []configEpoch {
	c4 := tierConfig{Strategy: "RoundRobin", Members: []memberConfig{{"gpu0", 4}, {"gpu1", 4}}}
	c2 := c4.clone()
	c2.Members[0].Ceiling = 2
	q := c2.clone()
	q.QuiesceMembers = map[string]bool{"gpu0": true}
	return []configEpoch{
		{Written: ms(0), Applied: ms(10), Config: c4},
		{Written: ms(1000), Applied: ms(1100), Config: c2},
		{Written: ms(5000), Applied: ms(5100), Config: q},
		{Written: ms(6000), Applied: ms(6100), Config: c2},
	}
}

func TestCeilingBound(t *testing.T) {
	hist := history()
	for _, tc := range []struct {
		desc   string
		member string
		t      int64
		want   int
	}{
		{"before any configuration", "gpu0", ms(-1), 0},
		{"first epoch", "gpu0", ms(500), 4},
		{"while the lowering may not be applied yet", "gpu0", ms(1050), 4},
		{"within the admission slack after the lowering", "gpu0", ms(1300), 4},
		{"after the slack", "gpu0", ms(1400), 2},
		{"unchanged member", "gpu1", ms(1400), 4},
		{"quiesce possibly not applied yet", "gpu0", ms(5050), 2},
		{"quiesced", "gpu0", ms(5500), 0},
		{"readmit possibly applied", "gpu0", ms(6050), 2},
		{"another member while gpu0 is quiesced", "gpu1", ms(5500), 4},
		{"not a member", "gpu9", ms(500), 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := ceilingBound(hist, tc.member, tc.t, admitSlack); got != tc.want {
				t.Fatalf("ceilingBound(%s, %d ms) = %d, want %d", tc.member, tc.t/ms(1), got, tc.want)
			}
		})
	}
}

func TestCheckOvershoot(t *testing.T) {
	hist := history()
	logs := map[string][]engineRecord{
		"gpu0": {
			{ID: "a", T: ms(100), Live: 4},  // at the ceiling
			{ID: "b", T: ms(1050), Live: 4}, // old ceiling possibly in force
			{ID: "c", T: ms(2000), Live: 3}, // above the lowered ceiling
			{ID: "d", T: ms(3000), Live: 3}, // above, but an abandoned exchange ended next to it
			{ID: "q", T: ms(5500), Live: 1}, // an arrival at a quiesced member
		},
		"gpu1": {{ID: "e", T: ms(100), Live: 4}},
	}
	// The second abandoned exchange cannot excuse the arrival at the
	// quiesced member: nothing may be admitted there at all.
	abandoned := map[string][]int64{"gpu0": {ms(2950), ms(5490)}}

	res := checkOvershoot(logs, hist, admitSlack, abandoned, false)
	if res.Checked != 6 || res.Violations != 2 || res.Excused != 1 {
		t.Fatalf("checked %d violations %d excused %d, want 6, 2, 1", res.Checked, res.Violations, res.Excused)
	}
	if len(res.Examples) != 2 || !strings.Contains(res.Examples[0], "request c ") || !strings.Contains(res.Examples[1], "request q ") {
		t.Fatalf("examples %v, want requests c and q", res.Examples)
	}
	if res.PeakLive["gpu0"] != 4 || res.PeakLive["gpu1"] != 4 {
		t.Fatalf("peak live %v", res.PeakLive)
	}
	if strict := checkOvershoot(logs, hist, admitSlack, abandoned, true); strict.Violations != 3 || strict.Excused != 0 {
		t.Fatalf("strict: violations %d excused %d, want 3, 0", strict.Violations, strict.Excused)
	}
	// An abandoned exchange outside the window excuses nothing.
	far := map[string][]int64{"gpu0": {ms(500)}}
	if res := checkOvershoot(logs, hist, admitSlack, far, false); res.Violations != 3 {
		t.Fatalf("violations %d with a distant abandoned exchange, want 3", res.Violations)
	}
}

func TestCheckDuplicates(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		logs       map[string][]engineRecord
		dups, anon int
	}{
		{"distinct", map[string][]engineRecord{"gpu0": {{ID: "a"}}, "gpu1": {{ID: "b"}}}, 0, 0},
		{"two engines", map[string][]engineRecord{"gpu0": {{ID: "a"}}, "gpu1": {{ID: "a"}}}, 1, 0},
		{"one engine twice", map[string][]engineRecord{"gpu0": {{ID: "a"}, {ID: "a"}, {ID: "b"}}}, 1, 0},
		{"without an id", map[string][]engineRecord{"gpu0": {{ID: ""}}}, 0, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res := checkDuplicates(tc.logs)
			if res.Duplicates != tc.dups || res.Unidentified != tc.anon {
				t.Fatalf("duplicates %d unidentified %d, want %d %d", res.Duplicates, res.Unidentified, tc.dups, tc.anon)
			}
			if tc.dups > 0 && len(res.Examples) != tc.dups {
				t.Fatalf("examples %v", res.Examples)
			}
		})
	}
}

func TestCheckLeases(t *testing.T) {
	clean := adminapi.CapacityView{Tiers: []adminapi.TierCapacity{{Tier: tierKey, Members: []adminapi.MemberCapacity{{ID: "gpu0"}}}}}
	if got := checkLeases(clean); len(got) != 0 {
		t.Fatalf("clean view reported %v", got)
	}
	leaked := adminapi.CapacityView{Tiers: []adminapi.TierCapacity{{Tier: tierKey, Active: 1,
		Members: []adminapi.MemberCapacity{{ID: "gpu0"}, {ID: "gpu1", Active: 1}}}}}
	if got := checkLeases(leaked); len(got) != 2 || !strings.Contains(got[0], "gpu1 holds 1") || !strings.Contains(got[1], "chaos holds 1") {
		t.Fatalf("leak reported as %v", got)
	}
	waiting := adminapi.CapacityView{Tiers: []adminapi.TierCapacity{{Tier: tierKey, Queue: adminapi.TierQueue{Waiting: 2},
		Members: []adminapi.MemberCapacity{{ID: "gpu0"}}}}}
	if got := checkLeases(waiting); len(got) != 1 || !strings.Contains(got[0], "2 waiting") {
		t.Fatalf("requests left waiting reported as %v", got)
	}
	skewed := adminapi.CapacityView{Tiers: []adminapi.TierCapacity{{Tier: tierKey, Active: 2,
		Members: []adminapi.MemberCapacity{{ID: "gpu0", Active: 1}}}}}
	if got := checkAccounting(skewed); len(got) != 1 {
		t.Fatalf("accounting error reported as %v", got)
	}
	if got := checkAccounting(leaked); len(got) != 0 {
		t.Fatalf("consistent view reported %v", got)
	}
}

func TestAnalyzeKills(t *testing.T) {
	kills := []killEvent{{Member: "gpu0", At: ms(1000)}, {Member: "gpu0", At: ms(8000)}}
	records := []requestRecord{
		{ID: "in flight at the next kill", Member: "gpu0", Start: ms(7990), End: ms(8003), Outcome: outcomeAborted},
		{ID: "in-flight", Member: "gpu0", Start: ms(990), End: ms(1001), Outcome: outcomeAborted},
		{ID: "same-ms", Member: "gpu0", Start: ms(1000), End: ms(1002), Outcome: outcomeErrorPrefix + "upstream_unavailable"},
		{ID: "first failure's ms", Member: "gpu0", Start: ms(1001) + int64(time.Millisecond/2), End: ms(1003), Outcome: outcomeErrorPrefix + "upstream_unavailable"},
		{ID: "late", Member: "gpu0", Start: ms(1200), End: ms(1201), Outcome: outcomeErrorPrefix + "upstream_unavailable"},
		{ID: "refused", Member: "", Start: ms(1200), End: ms(1201), Outcome: outcomeErrorPrefix + "no_eligible_member"},
		{ID: "other member", Member: "gpu1", Start: ms(1200), End: ms(1201), Outcome: outcomeErrorPrefix + "upstream_unavailable"},
		{ID: "faulted", Member: "gpu0", Fault: faultResetMidBody, Start: ms(1200), End: ms(1201), Outcome: outcomeAborted},
		{ID: "cut by its own fault just after the kill", Member: "gpu0", Fault: faultTruncateSSE, Start: ms(990), End: ms(1000) + 80_000, Outcome: outcomeAborted},
		{ID: "after the horizon", Member: "gpu0", Start: ms(9000), End: ms(9001), Outcome: outcomeErrorPrefix + "upstream_unavailable"},
	}
	got := analyzeKills(records, kills, nil)
	if len(got) != 2 {
		t.Fatalf("%d results", len(got))
	}
	// The request in flight at the second kill failed with it, not with
	// the first; the one at 9000 ms is past the first kill's horizon and a
	// late failure of the second.
	if k := got[1]; k.InFlight != 1 || k.Failed != 2 || k.Excess != 1 {
		t.Fatalf("second kill: got %+v, want in flight 1, failed 2, excess 1", k)
	}
	// The engine's death shows at 1001 ms (the in-flight request's end),
	// not at the faulted request cut by its own fault 0.08 ms after the
	// kill: the requests sent from the kill to 1002 ms raced it.
	if k := got[0]; k.Died != ms(1001) || k.InFlight != 1 || k.Dispatched != 2 || k.Failed != 4 || k.Excess != 1 {
		t.Fatalf("got %+v, want died at 1001 ms, in flight 1, dispatched 2, failed 4, excess 1", k)
	}
}

// TestAnalyzeKillsDatesDeathByEjection: the engine's death shows to the
// router at the first failure that ejected the member, not at a reset of a
// reused connection before it (which a live engine's idle close causes
// too), so the request refused after that reset raced the death. Without
// an ejecting failure the first failure dates it.
func TestAnalyzeKillsDatesDeathByEjection(t *testing.T) {
	kills := []killEvent{{Member: "gpu1", At: ms(1000)}}
	unavailable := outcomeErrorPrefix + "upstream_unavailable"
	records := []requestRecord{
		{ID: "in flight", Member: "gpu1", Start: ms(990), End: ms(1005), Outcome: outcomeAborted},
		{ID: "reused reset", Member: "gpu1", Start: ms(1001), End: ms(1004), Outcome: unavailable},
		{ID: "refused", Member: "gpu1", Start: ms(1006), End: ms(1007), Outcome: unavailable},
		{ID: "after the ejection", Member: "gpu1", Start: ms(1100), End: ms(1101), Outcome: unavailable},
	}
	ejected := map[string]bool{"refused": true, "after the ejection": true}
	got := analyzeKills(records, kills, ejected)
	if k := got[0]; k.Died != ms(1007) || k.InFlight != 1 || k.Dispatched != 2 || k.Failed != 4 || k.Excess != 1 {
		t.Fatalf("got %+v, want died at 1007 ms (the refusal), in flight 1, dispatched 2, failed 4, excess 1", k)
	}
	got = analyzeKills(records, kills, nil)
	if k := got[0]; k.Died != ms(1004) || k.Dispatched != 1 || k.Excess != 2 {
		t.Fatalf("no ejection recorded: got %+v, want died at 1004 ms (the first failure), dispatched 1, excess 2", k)
	}
}

func TestCheckOutcomes(t *testing.T) {
	kills := []killEvent{{Member: "gpu0", At: ms(1000)}}
	records := []requestRecord{
		{ID: "ok", Outcome: outcomeOK},
		{ID: "ok-unlogged", Outcome: outcomeOK},
		{ID: "refused", Outcome: outcomeErrorPrefix + "capacity_exhausted"},
		{ID: "queue full", Outcome: outcomeErrorPrefix + "queue_full"},
		{ID: "queue timeout", Outcome: outcomeErrorPrefix + "queue_timeout"},
		{ID: "faulted abort", Fault: faultTruncateSSE, Outcome: outcomeAborted},
		{ID: "killed abort", Member: "gpu0", Start: ms(900), End: ms(1100), Outcome: outcomeAborted},
		{ID: "unexplained abort", Member: "gpu1", Start: ms(900), End: ms(1100), Outcome: outcomeAborted},
		{ID: "bad", Outcome: outcomeBadContent},
		{ID: "hostile", Fault: faultEndlessHeader, Outcome: outcomeErrorPrefix + "upstream_unavailable"},
		{ID: "hostile timeout", Fault: faultInformationalFx, Outcome: outcomeErrorPrefix + "upstream_timeout"},
		{ID: "hostile refused", Fault: faultInformationalFx, Outcome: outcomeErrorPrefix + "capacity_exhausted"},
	}
	logged := map[string]bool{"ok": true, "hostile": true, "hostile timeout": true}
	res := checkOutcomes(records, kills, logged, map[string]string{"ok-unlogged": "complete"})
	if res.Bad != 4 {
		t.Fatalf("bad %d, want 4 (unlogged 200, unexplained abort, bad content, hostile answered 504): %v", res.Bad, res.Examples)
	}
	if want := `ok-unlogged (ok; fault "", engine logged false, router end complete): answered 200 but no engine logged it `; res.Examples[0] != want {
		t.Errorf("example %q, want %q", res.Examples[0], want)
	}
	if want := `bad (bad_content; fault "", engine logged false, router end none): undocumented answer `; res.Examples[2] != want {
		t.Errorf("example %q, want %q", res.Examples[2], want)
	}
	if res.ByOutcome[outcomeAborted] != 3 || res.ByOutcome[outcomeOK] != 2 {
		t.Fatalf("by outcome %v", res.ByOutcome)
	}
}

// TestCheckStreamOutcomes: a truncate_sse request the engine cut must be
// recorded truncated (complete is always wrong; another outcome only when
// its member was killed in flight), a whole answer complete; requests
// without a record are not checked.
func TestCheckStreamOutcomes(t *testing.T) {
	kills := []killEvent{{Member: "gpu0", At: ms(1000)}}
	records := []requestRecord{
		{ID: "cut", Fault: faultTruncateSSE, Outcome: outcomeAborted},
		{ID: "cut as complete", Fault: faultTruncateSSE, Outcome: outcomeAborted},
		{ID: "cut as upstream_error", Fault: faultTruncateSSE, Outcome: outcomeAborted, Member: "gpu1", Start: ms(900), End: ms(1100)},
		{ID: "cut, killed", Fault: faultTruncateSSE, Outcome: outcomeAborted, Member: "gpu0", Start: ms(900), End: ms(1100)},
		{ID: "cut, killed, complete", Fault: faultTruncateSSE, Outcome: outcomeAborted, Member: "gpu0", Start: ms(900), End: ms(1100)},
		{ID: "not cut", Fault: faultTruncateSSE, Outcome: outcomeErrorPrefix + "capacity_exhausted"},
		{ID: "cut, no record", Fault: faultTruncateSSE, Outcome: outcomeAborted},
		{ID: "ok", Outcome: outcomeOK},
		{ID: "ok as truncated", Outcome: outcomeOK},
		{ID: "reset", Fault: faultResetMidBody, Outcome: outcomeAborted},
	}
	logged := map[string]bool{"cut": true, "cut as complete": true, "cut as upstream_error": true, "cut, killed": true,
		"cut, killed, complete": true, "cut, no record": true, "ok": true, "ok as truncated": true, "reset": true}
	ends := map[string]string{
		"cut": "truncated", "cut as complete": "complete", "cut as upstream_error": "upstream_error",
		"cut, killed": "upstream_error", "cut, killed, complete": "complete", "ok": "complete",
		"ok as truncated": "truncated", "reset": "upstream_error", "other": "complete",
	}
	res := checkStreamOutcomes(records, ends, kills, logged)
	if res.Bad != 4 || res.TruncateFaults != 5 || res.Records != len(ends) {
		t.Fatalf("bad %d, truncate faults %d, records %d; want 4 (cut as complete, cut as upstream_error, "+
			"cut, killed, complete, ok as truncated), 5, %d: %v", res.Bad, res.TruncateFaults, res.Records, len(ends), res.Examples)
	}
	for _, id := range []string{"cut as complete", "cut as upstream_error", "cut, killed, complete", "ok as truncated"} {
		if !strings.Contains(strings.Join(res.Examples, "\n"), id+" (") {
			t.Errorf("examples %v lack %q", res.Examples, id)
		}
	}
	if res.ByEnd["complete"] != 3 || res.ByEnd["truncated"] != 2 || res.ByEnd["upstream_error"] != 3 {
		t.Errorf("by end %v", res.ByEnd)
	}

	// Cut requests without any record: the log was not read.
	if res := checkStreamOutcomes(records, map[string]string{}, kills, logged); res.Bad != 1 {
		t.Fatalf("no records: bad %d, want 1: %v", res.Bad, res.Examples)
	}
	// A run without cut streams and without records is fine.
	if res := checkStreamOutcomes(records[7:8], nil, nil, logged); res.Bad != 0 {
		t.Fatalf("no truncate faults: bad %d: %v", res.Bad, res.Examples)
	}
}

// TestReadDecisions reads a decision log file: admitted records' stream
// outcomes and ejections by request id, refusals and unparsable lines
// skipped.
func TestReadDecisions(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var buf []byte
	for _, r := range []evidence.Record{
		{RequestID: "a", Time: start, Duration: time.Millisecond, Alias: "m", Tier: "soak/chaos", Outcome: evidence.OutcomeAdmitted,
			Status: 200, Member: "gpu0", Dispatch: 10 * time.Microsecond, FirstByte: 100 * time.Microsecond, End: evidence.StreamTruncated},
		{RequestID: "b", Time: start, Duration: time.Millisecond, Alias: "m", Tier: "soak/chaos", Outcome: evidence.OutcomeNotAdmitted,
			Status: 503, Code: evidence.CodeCapacityExhausted},
		{RequestID: "c", Time: start, Duration: time.Millisecond, Alias: "m", Tier: "soak/chaos", Outcome: evidence.OutcomeAdmitted,
			Status: 502, Code: evidence.CodeUpstreamUnavailable, Member: "gpu1", Dispatch: 10 * time.Microsecond,
			End: evidence.StreamUpstreamUnavailable, Ejection: evidence.EjectionRefused},
	} {
		line, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(append(buf, bytes.TrimSuffix(line, []byte("\n"))...), '\n')
	}
	buf = append(buf, "not a record\n"...)
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDecisions()
	if err := readDecisions(path, d); err != nil {
		t.Fatal(err)
	}
	if len(d.ends) != 2 || d.ends["a"] != "truncated" || d.ends["c"] != "upstream_unavailable" {
		t.Fatalf("ends %v, want a: truncated, c: upstream_unavailable only", d.ends)
	}
	if len(d.ejected) != 1 || !d.ejected["c"] {
		t.Fatalf("ejected %v, want c only", d.ejected)
	}
	if err := readDecisions(path+".missing", d); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestCheckResources(t *testing.T) {
	base := resources{Goroutines: 20, FDs: 30, RSSKiB: 1000}
	slack := resourceSlack{Goroutines: 5, FDs: 5, RSSKiB: 100}
	for _, tc := range []struct {
		desc  string
		final resources
		want  int
	}{
		{"within", resources{Goroutines: 25, FDs: 25, RSSKiB: 1100}, 0},
		{"goroutine leak", resources{Goroutines: 26, FDs: 30, RSSKiB: 1000}, 1},
		{"fd leak", resources{Goroutines: 20, FDs: 36, RSSKiB: 1000}, 1},
		// Below the quiet baseline leaks nothing (the pools held less).
		{"fds and goroutines far below", resources{Goroutines: 10, FDs: 19, RSSKiB: 900}, 0},
		{"rss growth", resources{Goroutines: 20, FDs: 30, RSSKiB: 1101}, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := checkResources(base, tc.final, slack); len(got) != tc.want {
				t.Fatalf("checkResources = %v, want %d differences", got, tc.want)
			}
		})
	}
}

func TestRouterPanics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.log")
	log := `{"level":"INFO","msg":"serving"}
{"level":"ERROR","msg":"panic serving a request","panic":"boom\ngoroutine 7"}
not json
{"level":"ERROR","msg":"another error","panic":"not one"}
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := routerPanics(path)
	if err != nil || len(got) != 1 || got[0] != "boom\ngoroutine 7" {
		t.Fatalf("routerPanics = %q, %v; want the one panic", got, err)
	}
	if _, err := routerPanics(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing log: %v", err)
	}
}
