//go:build linux

package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseOptionsBaseline(t *testing.T) {
	o, err := parseOptions([]string{"-scenarios", "overhead", "-baseline", "HEAD~3", "-syscall-requests", "2000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.baseline != "HEAD~3" || o.syscallRequests != 2000 || !o.scenarios["overhead"] {
		t.Fatalf("options = %+v", o)
	}
	if o, err = parseOptions(nil, io.Discard); err != nil || o.baseline != "" || o.syscallRequests != 5000 {
		t.Fatalf("defaults: baseline %q, syscall requests %d, %v", o.baseline, o.syscallRequests, err)
	}
	if o, err = parseOptions([]string{"-quick"}, io.Discard); err != nil || o.syscallRequests != 1000 {
		t.Fatalf("-quick: syscall requests %d, %v", o.syscallRequests, err)
	}
	for _, args := range [][]string{{"-syscall-requests", "31"}, {"-baseline", "-quick"}} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) accepted it", args)
		}
	}
}

// TestBaselineSteps checks the baseline's build: the commit's tree, not
// the work tree, archived into the source directory and built there with
// the work tree router's own command.
func TestBaselineSteps(t *testing.T) {
	got := baselineSteps("/repo", "0123abcd", "/tmp/src", "/out/bin/router-0123abc")
	want := []toolStep{
		{name: "baseline-archive", dir: "/repo", bin: "git", args: []string{"archive", "--format=tar", "-o", "/tmp/src/tree.tar", "0123abcd"}},
		{name: "baseline-extract", dir: "/tmp/src", bin: "tar", args: []string{"-xf", "/tmp/src/tree.tar"}},
		{name: "baseline-build", dir: "/tmp/src", bin: "go", args: []string{"build", "-o", "/out/bin/router-0123abc", "./cmd/router"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("steps =\n%+v\nwant\n%+v", got, want)
	}
}

func TestOverheadSystems(t *testing.T) {
	tiers := []tierSpec{{Name: "rr", Strategy: "RoundRobin"}, {Name: "cp", Strategy: "Capacity"}}
	rt := &routerProc{front: "127.0.0.1:1", tiers: tiers}
	base := &routerProc{front: "127.0.0.1:2", tiers: tiers}
	bare, hp := &haproxyProc{addr: "127.0.0.1:3"}, &haproxyProc{addr: "127.0.0.1:4"}
	b := &baselineRouter{revision: "main", commit: "abc1234"}

	type row struct {
		name, url, model, tier string
		baseline               bool
		router                 *routerProc
	}
	rows := func(systems []*overheadSystem) []row {
		var out []row
		for _, s := range systems {
			out = append(out, row{s.Name, s.URL, s.model, s.capacityTier, s.Baseline, s.router})
		}
		return out
	}
	head := []row{
		{"direct", "http://127.0.0.1:9/v1/chat/completions", benchModel, "", false, nil},
		{"sluice RoundRobin", "http://127.0.0.1:1/v1/chat/completions", aliasRoundRobin, "", false, rt},
		{"sluice Capacity", "http://127.0.0.1:1/v1/chat/completions", aliasCapacity, "bench/cp", false, rt},
	}
	tail := []row{
		{bareProxyName, "http://127.0.0.1:3/v1/chat/completions", benchModel, "", false, nil},
		{"HAProxy leastconn", "http://127.0.0.1:4/v1/chat/completions", benchModel, "", false, nil},
	}
	if got, want := rows(overheadSystems("http://127.0.0.1:9/v1", rt, nil, nil, bare, hp)), append(append([]row{}, head...), tail...); !reflect.DeepEqual(got, want) {
		t.Fatalf("without a baseline:\n%+v\nwant\n%+v", got, want)
	}
	want := append(append(append([]row{}, head...),
		row{"sluice@abc1234 RoundRobin", "http://127.0.0.1:2/v1/chat/completions", aliasRoundRobin, "", true, base},
		row{"sluice@abc1234 Capacity", "http://127.0.0.1:2/v1/chat/completions", aliasCapacity, "bench/cp", true, base}), tail...)
	if got := rows(overheadSystems("http://127.0.0.1:9/v1", rt, base, b, bare, hp)); !reflect.DeepEqual(got, want) {
		t.Fatalf("with a baseline:\n%+v\nwant\n%+v", got, want)
	}
}

// baselineFixture is overheadFixture with the baseline router's two rows
// before HAProxy, and the system call phase.
func baselineFixture() *results {
	systems := overheadFixture()
	rr, cp := *systems[1], *systems[2]
	rr.Name, rr.Baseline = "sluice@abc1234 RoundRobin", true
	cp.Name, cp.Baseline = "sluice@abc1234 Capacity", true
	rr.C1 = []wrkResult{wrkAt(400, 900, 1), wrkAt(400, 900, 1), wrkAt(400, 900, 1)}
	systems = append(systems[:3], &rr, &cp, systems[3])
	allocs := 61.0
	return &results{
		Meta: meta{Date: "D", Commit: "c0ffee0", Baseline: &baselineMeta{Revision: "HEAD~3", Commit: "abc1234"}},
		Overhead: &overheadResult{Rounds: 3, RunSeconds: 4, Systems: systems, Syscalls: &syscallResult{Requests: 5000, Concurrency: 32, Command: perfStatCommand(), Rows: []syscallRow{
			{Name: "sluice RoundRobin", Requests: 5000, PerRequest: syscallCounts{Read: 5.86, Write: 2, Epoll: 0.34, Futex: 0.37, FutexWake: 0.18, Other: 1.21, Total: 9.78}, AllocsPerRequest: &allocs},
			{Name: "sluice@abc1234 RoundRobin", Baseline: true, Requests: 5000, PerRequest: syscallCounts{Read: 5.67, Total: 8.75}},
			{Name: "HAProxy leastconn", Requests: 5000, PerRequest: syscallCounts{Read: 2.06, Write: 2.03, Epoll: 0.35, Other: 0.85, Total: 5.29}},
		}}},
		Streams:         &streamsResult{Streams: 1000, HWMKiB: 50 * 1024, Phases: []streamsPhase{{Name: "complete", Succeeded: 1000}}},
		StreamsBaseline: &streamsResult{Router: "sluice@abc1234", Streams: 1000, HWMKiB: 70 * 1024, Phases: []streamsPhase{{Name: "complete", Succeeded: 1000}}},
	}
}

func TestBaselineReport(t *testing.T) {
	r := baselineFixture()
	var err error
	if r.Overhead.Summary, err = summarizeOverhead(r.Overhead.Systems); err != nil {
		t.Fatal(err)
	}
	if rows := r.Overhead.Summary.Rows; !rows[3].Baseline || !rows[4].Baseline || rows[2].Baseline || rows[5].Name != "HAProxy leastconn" || rows[3].AddedP50US != 345 {
		t.Fatalf("summary rows = %+v", rows)
	}
	r.Verdicts = r.verdicts()
	for _, v := range r.Verdicts {
		if strings.Contains(v.Target, "abc1234") {
			t.Errorf("a target judges the baseline: %+v", v)
		}
	}
	if len(r.Verdicts) != 2*3+2 {
		t.Errorf("verdicts = %+v, want the work tree's two tiers' three and the 1000 streams' two", r.Verdicts)
	}
	md := summaryMarkdown(r)
	for _, s := range []string{
		"Baseline: the rows and sections named `sluice@abc1234` measure the router built from `-baseline HEAD~3` (commit abc1234)",
		"| sluice@abc1234 RoundRobin | 400 µs |",
		"--filter 'op == 1 || op == 129",
		"-p PID -e raw_syscalls:sys_enter",
		"| sluice RoundRobin | 5.86 | 2.00 | 0.34 | 0.37 (0.18) | 1.21 | 9.78 | 61 | 80 µs |",
		"| sluice@abc1234 RoundRobin | 5.67 | 0.00 | 0.00 | 0.00 (0.00) | 0.00 | 8.75 | — | 80 µs |",
		"| HAProxy leastconn | 2.06 | 2.03 | 0.35 | 0.00 (0.00) | 0.85 | 5.29 | — | — |",
		"## 1000 concurrent SSE streams through one router",
		"## 1000 concurrent SSE streams through the baseline router, sluice@abc1234 (Capacity tier, 3 engines)",
		"VmHWM): 70.0 MiB",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
	if strings.Index(md, "through one router") > strings.Index(md, "through the baseline router") {
		t.Errorf("the baseline's streams come before the work tree's:\n%s", md)
	}

	// The results file keeps everything the summary is rendered from.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rerender(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "summary.md")); err != nil || string(got) != md { //nolint:gosec // a file of this test.
		t.Fatalf("re-rendered summary differs (%v):\n%s", err, got)
	}
}

func TestKeepResultsBaseline(t *testing.T) {
	prev := baselineFixture()
	cur := &results{}
	keepResults(cur, prev, map[string]bool{"overhead": true})
	if cur.Streams != prev.Streams || cur.StreamsBaseline != prev.StreamsBaseline || cur.Overhead != nil {
		t.Fatalf("kept: streams %v, baseline streams %v, overhead %v", cur.Streams, cur.StreamsBaseline, cur.Overhead)
	}
}
