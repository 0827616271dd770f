//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// wrkAt returns a wrk result with the given p50, p99 and throughput.
func wrkAt(p50, p99, rps float64) wrkResult {
	return wrkResult{Requests: 100, Seconds: 1, RPS: rps, P50US: p50, P90US: p50, P99US: p99}
}

// overheadFixture is three rounds of four systems.
func overheadFixture() []*overheadSystem {
	return []*overheadSystem{
		{Name: "direct", C1: []wrkResult{wrkAt(50, 500, 1), wrkAt(60, 700, 1), wrkAt(55, 600, 1)},
			C32: []wrkResult{wrkAt(1, 1, 30000), wrkAt(1, 1, 28000), wrkAt(1, 1, 29000)}},
		{Name: "sluice RoundRobin", C1: []wrkResult{wrkAt(150, 900, 1), wrkAt(200, 2700, 1), wrkAt(155, 1000, 1)},
			C32: []wrkResult{wrkAt(1, 1, 7000), wrkAt(1, 1, 9000), wrkAt(1, 1, 8000)}, C32CPUUS: []float64{90, 70, 80}},
		{Name: "sluice Capacity", C1: []wrkResult{wrkAt(170, 900, 1), wrkAt(180, 900, 1), wrkAt(175, 900, 1)},
			C32: []wrkResult{wrkAt(1, 1, 8000), wrkAt(1, 1, 8000), wrkAt(1, 1, 8000)}},
		{Name: "HAProxy leastconn", C1: []wrkResult{wrkAt(150, 800, 1), wrkAt(160, 900, 1), wrkAt(155, 850, 1)},
			C32: []wrkResult{wrkAt(1, 1, 10000), wrkAt(1, 1, 12000), wrkAt(1, 1, 10000)}},
	}
}

func TestSummarizeOverhead(t *testing.T) {
	sum, err := summarizeOverhead(overheadFixture())
	if err != nil {
		t.Fatal(err)
	}
	rr := sum.Rows[1]
	// Same-round differences: 100, 140, 100 µs (p50) and 400, 2000, 400 µs (p99).
	if rr.AddedP50US != 100 || rr.AddedP99US != 400 || rr.P50US != 155 {
		t.Fatalf("RoundRobin row = %+v", rr)
	}
	// Same-round ratios to HAProxy: 0.7, 0.75, 0.8.
	if math.Abs(rr.VsHAProxy-0.75) > 1e-12 || rr.RPS32 != 8000 {
		t.Fatalf("RoundRobin throughput = %v (%v× HAProxy)", rr.RPS32, rr.VsHAProxy)
	}
	if rr.CPUPerRequestUS != 80 {
		t.Fatalf("RoundRobin CPU per request = %v µs, want the median 80", rr.CPUPerRequestUS)
	}
	if d := sum.Rows[0]; d.AddedP50US != 0 || d.AddedP99US != 0 || d.CPUPerRequestUS != 0 {
		t.Fatalf("direct adds to itself: %+v", d)
	}
	if h := sum.Rows[3]; h.VsHAProxy != 1 {
		t.Fatalf("HAProxy vs itself = %v", h.VsHAProxy)
	}

	missing := overheadFixture()
	missing[2].C32 = missing[2].C32[:2]
	if _, err := summarizeOverhead(missing); !errors.Is(err, errLengthMismatch) {
		t.Fatalf("a missing round gave %v, want errLengthMismatch", err)
	}
	empty := overheadFixture()
	empty[1].C1 = nil
	if _, err := summarizeOverhead(empty); !errors.Is(err, errNoSamples) {
		t.Fatalf("no rounds gave %v, want errNoSamples", err)
	}
}

// hiddenRunWith returns a run with the given e2e p99 in milliseconds.
func hiddenRunWith(p99ms int) hiddenRun {
	return hiddenRun{Sent: 10, Succeeded: 10, E2E: loadgen.Summary{P50: 400 * time.Millisecond, P99: time.Duration(p99ms) * time.Millisecond}}
}

func TestSummarizeHidden(t *testing.T) {
	systems := []*hiddenSystem{
		{Name: "sluice RoundRobin", Runs: []hiddenRun{hiddenRunWith(2000), hiddenRunWith(3000), hiddenRunWith(2500)}},
		{Name: "sluice Capacity", Runs: []hiddenRun{hiddenRunWith(700), hiddenRunWith(600), hiddenRunWith(750)}},
		{Name: "HAProxy leastconn", Runs: []hiddenRun{hiddenRunWith(700), hiddenRunWith(1200), hiddenRunWith(750)}},
	}
	systems[1].Runs[2].Overshoot = 2
	sum, err := summarizeHidden(systems)
	if err != nil {
		t.Fatal(err)
	}
	// Same-round ratios to RoundRobin: 0.35, 0.2, 0.3; to HAProxy: 1, 0.5, 1.
	if math.Abs(sum.CapacityVsRoundRobinP99-0.3) > 1e-12 || sum.CapacityVsHAProxyP99 != 1 {
		t.Fatalf("ratios = %v, %v", sum.CapacityVsRoundRobinP99, sum.CapacityVsHAProxyP99)
	}
	if sum.Rows[1].E2EP99 != 700 || sum.Rows[1].MaxOver != 2 || sum.Rows[1].Requests != 10 {
		t.Fatalf("Capacity row = %+v", sum.Rows[1])
	}
}

func TestVerdictsAndReport(t *testing.T) {
	ov, err := summarizeOverhead(overheadFixture())
	if err != nil {
		t.Fatal(err)
	}
	r := &results{
		Meta: meta{Date: "2026-01-01T00:00:00Z", CPUs: 2, LoadAvg: []loadSample{{At: "end", LoadAvg: "1 1 1"}},
			CPU: []cpuUsage{{Scenario: "proxy overhead", WallSeconds: 100, OtherShare: 0.3}}},
		Core: &coreResult{Command: "go test", Capacity16: coreRow{NsPerOp: 2500}, Tiers1: coreRow{NsPerOp: 400, AllocsPerOp: 0},
			Tiers64: coreRow{NsPerOp: 420, AllocsPerOp: 0}, Tiers64VsTiers1: 1.05, Rows: []coreRow{{Name: benchCapacity16, NsPerOp: 2500}}},
		Overhead: &overheadResult{Rounds: 3, RunSeconds: 4, Systems: overheadFixture(), Summary: ov},
		Hidden: &hiddenResult{Rounds: 1, Summary: hiddenSummary{
			Rows:                    []hiddenRow{{Name: "sluice RoundRobin"}, {Name: "sluice Capacity", MaxOver: 1}, {Name: "HAProxy leastconn"}},
			CapacityVsRoundRobinP99: 0.5, CapacityVsHAProxyP99: 1.1,
		}},
		Streams: &streamsResult{Streams: 1000, HWMKiB: 150 * 1024, Phases: []streamsPhase{
			{Name: "complete", Succeeded: 1000, LeasesAfter: 0, PeakRSSKiB: 90 * 1024, PeakAnonKiB: 60 * 1024,
				Timeline: []streamsSample{{T: 0, RSSMiB: 20}, {T: 1, RSSMiB: 90, Active: 1000}},
				Heap: &heapSnapshot{File: "router-heap-streams1000.pprof", LiveMiB: 30, StackInuseMiB: 10, NextGCMiB: 70, SysMiB: 60,
					Sites: []heapSite{{Function: "bufio.NewReaderSize", MiB: 8}}}},
			{Name: "cut", TimedOut: 1000, LeasesAfter: 3, PeakAnonKiB: 70 * 1024, Timeline: []streamsSample{{T: 0, RSSMiB: 90}}},
		}},
		Streams5000: &streamsResult{Streams: 5000, HWMKiB: 400 * 1024, Phases: []streamsPhase{
			{Name: "complete", Succeeded: 4992, Failed: 8, PeakActive: 4992, Refusals: map[string]int{"no_eligible_member": 8},
				ClientErrors: map[string]int{"status": 8}, Statuses: map[int]int{503: 8}},
		}},
	}
	r.Verdicts = r.verdicts()
	met := map[string]bool{}
	for _, v := range r.Verdicts {
		met[v.Target] = v.Met
	}
	want := map[string]bool{
		"Acquire+Release, 16 members, Capacity: ≤ 2 µs median single-thread":         false,
		"Acquire+Release: no allocation growth with tier count (64 vs 1 tier)":       true,
		"sluice RoundRobin: p50 added at concurrency 1 ≤ 150 µs":                     true,
		"sluice RoundRobin: p99 added at concurrency 1 ≤ 1 ms":                       true,
		"sluice RoundRobin: throughput at 32 connections ≥ 0.7× HAProxy leastconn":   true,
		"hidden load: Capacity e2e p99 ≤ 0.6× RoundRobin":                            true,
		"hidden load: Capacity e2e p99 ≤ HAProxy leastconn":                          false,
		"hidden load: sluice Capacity ceiling overshoot 0":                           false,
		"1000 concurrent SSE streams: zero leaked leases":                            false,
		"1000 concurrent SSE streams: anonymous RSS ≤ 64 MiB":                        false,
		"5000 concurrent SSE streams: zero leaked leases (RSS published, no target)": true,
	}
	for target, w := range want {
		got, ok := met[target]
		if !ok || got != w {
			t.Errorf("verdict %q = %v (present %v), want %v", target, got, ok, w)
		}
	}
	md := summaryMarkdown(r)
	for _, s := range []string{"| sluice RoundRobin | 155 µs |", "**not met**", "0.50×", "goroutines not exposed", "| proxy overhead | 100 s |", "| " + benchCapacity16 + " | 2500 |",
		"## 5000 concurrent SSE streams", "| complete | 4992 | 0 | 4992 |", "400.0 MiB",
		"| complete | 1000 | 0 | 0 | 90.0 MiB | 60.0 MiB |", "live heap 30.0 MiB, goroutine stacks 10.0 MiB (10.2 KiB per stream)", "`bufio.NewReaderSize` 8.0 MiB",
		"8 of the complete streams failed: client errors map[status:8], statuses map[503:8]; the router's decision log (its last records): refusals map[no_eligible_member:8]"} {
		if !strings.Contains(md, s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
	dir := t.TempDir()
	if err := writeCharts(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"overhead-latency.svg", "overhead-throughput.svg", "hidden-load.svg", "streams-rss.svg", "streams-leases.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("chart %s: %v", f, err)
		}
	}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if err := os.WriteFile(filepath.Join(again, "results.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rerender(again, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(again, "summary.md")); err != nil || string(got) != md { //nolint:gosec // a file of this test.
		t.Fatalf("re-rendered summary differs (%v):\n%s", err, got)
	}
}
