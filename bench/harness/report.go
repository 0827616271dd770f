//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// The targets of docs/BENCHMARKS.md#targets.
const (
	// targetAcquireReleaseNs is the most one Acquire+Release of a
	// 16-member Capacity tier may take, single-thread.
	targetAcquireReleaseNs = 2000
	// targetAddedP50US is the most the router may add to the p50 latency
	// at concurrency 1.
	targetAddedP50US = 150
	// targetAddedP99US is the most the router may add to the p99 latency
	// at concurrency 1.
	targetAddedP99US = 1000
	// targetVsHAProxy is the least router throughput at 32 connections,
	// as a fraction of HAProxy's.
	targetVsHAProxy = 0.7
	// targetCapacityVsRoundRobin is the most Capacity's e2e p99 may be, as
	// a fraction of RoundRobin's, under hidden load.
	targetCapacityVsRoundRobin = 0.6
	// targetCapacityVsHAProxy is the most Capacity's e2e p99 may be, as a
	// fraction of HAProxy leastconn's.
	targetCapacityVsHAProxy = 1.0
	// targetQueueVsEngineQueue is the most the late binding queue's e2e
	// p99 may be, as a fraction of engine-side queueing's (Capacity with
	// ceilings above engine capacity), at the same offered load.
	targetQueueVsEngineQueue = 0.7
	// targetLightVsHeavyWait is the most the light tenant's p99 wait may
	// be, as a fraction of the heavy tenant's.
	targetLightVsHeavyWait = 0.25
	// targetStreamsRSSMiB is the most anonymous memory (heap and stacks,
	// without the file pages the binary maps) the router may reach with
	// 1000 concurrent streams.
	targetStreamsRSSMiB = 64
)

// results is everything one run measured.
type results struct {
	Meta     meta            `json:"meta"`
	Core     *coreResult     `json:"core,omitempty"`
	Overhead *overheadResult `json:"overhead,omitempty"`
	Hidden   *hiddenResult   `json:"hidden_load,omitempty"`
	Late     *lateResult     `json:"late_binding,omitempty"`
	Tenants  *tenantResult   `json:"two_tenants,omitempty"`
	Streams  *streamsResult  `json:"streams,omitempty"`
	// Streams5000 is 5000 streams read to the end: published, no target.
	Streams5000 *streamsResult `json:"streams_5000,omitempty"`
	// StreamsBaseline and Streams5000Baseline are the same runs through
	// the -baseline router; no target judges them.
	StreamsBaseline *streamsResult `json:"streams_baseline,omitempty"`
	// Streams5000Baseline is 5000 streams through the -baseline router.
	Streams5000Baseline *streamsResult `json:"streams_5000_baseline,omitempty"`
	Verdicts            []verdict      `json:"verdicts"`
}

// verdict is one target of docs/BENCHMARKS.md#targets against its
// measurement.
type verdict struct {
	// Target quotes the target.
	Target string `json:"target"`
	// Measured is the figure that decides it.
	Measured string `json:"measured"`
	// Met says whether the target is met.
	Met bool `json:"met"`
}

// verdicts judges the measurements against the targets of
// docs/BENCHMARKS.md#targets.
func (r *results) verdicts() []verdict {
	var out []verdict
	if c := r.Core; c != nil {
		out = append(out,
			verdict{
				Target:   "Acquire+Release, 16 members, Capacity: ≤ 2 µs median single-thread",
				Measured: fmt.Sprintf("%.0f ns", c.Capacity16.NsPerOp),
				Met:      c.Capacity16.NsPerOp <= targetAcquireReleaseNs,
			},
			verdict{
				Target:   "Acquire+Release: no allocation growth with tier count (64 vs 1 tier)",
				Measured: fmt.Sprintf("%.0f vs %.0f allocs/op", c.Tiers64.AllocsPerOp, c.Tiers1.AllocsPerOp),
				Met:      c.Tiers64.AllocsPerOp <= c.Tiers1.AllocsPerOp,
			},
			verdict{
				Target:   fmt.Sprintf("Acquire+Release: 256 members across 64 tiers cost the same per decision as 1 tier (within %.2f×)", sameCostTolerance),
				Measured: fmt.Sprintf("%.0f vs %.0f ns (%.2f×)", c.Tiers64.NsPerOp, c.Tiers1.NsPerOp, c.Tiers64VsTiers1),
				Met:      c.Tiers64VsTiers1 <= sameCostTolerance,
			})
	}
	if r.Overhead != nil {
		for _, row := range r.Overhead.Summary.Rows {
			if !strings.HasPrefix(row.Name, "sluice") || row.Baseline {
				continue
			}
			out = append(out,
				verdict{
					Target:   row.Name + ": p50 added at concurrency 1 ≤ 150 µs",
					Measured: fmt.Sprintf("%.0f µs", row.AddedP50US),
					Met:      row.AddedP50US <= targetAddedP50US,
				},
				verdict{
					Target:   row.Name + ": p99 added at concurrency 1 ≤ 1 ms",
					Measured: fmt.Sprintf("%.0f µs", row.AddedP99US),
					Met:      row.AddedP99US <= targetAddedP99US,
				},
				verdict{
					Target:   row.Name + ": throughput at 32 connections ≥ 0.7× HAProxy leastconn",
					Measured: fmt.Sprintf("%.2f×", row.VsHAProxy),
					Met:      row.VsHAProxy >= targetVsHAProxy,
				})
		}
	}
	if h := r.Hidden; h != nil {
		out = append(out,
			verdict{
				Target:   "hidden load: Capacity e2e p99 ≤ 0.6× RoundRobin",
				Measured: fmt.Sprintf("%.2f×", h.Summary.CapacityVsRoundRobinP99),
				Met:      h.Summary.CapacityVsRoundRobinP99 <= targetCapacityVsRoundRobin,
			},
			verdict{
				Target:   "hidden load: Capacity e2e p99 ≤ HAProxy leastconn",
				Measured: fmt.Sprintf("%.2f×", h.Summary.CapacityVsHAProxyP99),
				Met:      h.Summary.CapacityVsHAProxyP99 <= targetCapacityVsHAProxy,
			})
		for _, row := range h.Summary.Rows {
			if strings.HasPrefix(row.Name, "sluice") {
				out = append(out, verdict{
					Target:   "hidden load: " + row.Name + " ceiling overshoot 0",
					Measured: fmt.Sprint(row.MaxOver),
					Met:      row.MaxOver == 0,
				})
			}
		}
	}
	if l := r.Late; l != nil {
		out = append(out,
			verdict{
				Target:   fmt.Sprintf("late binding: Capacity + queue e2e p99 ≤ %.1f× Capacity with engine-side queueing, same offered load", targetQueueVsEngineQueue),
				Measured: fmt.Sprintf("%.2f×", l.Summary.QueueVsEngineQueueP99),
				Met:      l.Summary.QueueVsEngineQueueP99 <= targetQueueVsEngineQueue,
			},
			verdict{
				Target:   "late binding: Capacity + queue refuses 0 requests while the queue bound holds",
				Measured: fmt.Sprintf("%d refused", l.Summary.QueueRefused),
				Met:      l.Summary.QueueRefused == 0,
			})
	}
	if t := r.Tenants; t != nil {
		out = append(out,
			verdict{
				Target: fmt.Sprintf("two tenants (10× rate): light tenant's p99 wait ≤ %.2f× the heavy tenant's", targetLightVsHeavyWait),
				Measured: fmt.Sprintf("%.2f× (router's time queued: %.0f ms vs %.0f ms; client's time to headers: %.2f×)",
					t.LightVsHeavyWaitP99, loadgen.Milliseconds(t.Light.Queue.Wait.P99), loadgen.Milliseconds(t.Heavy.Queue.Wait.P99), t.LightVsHeavyHeadersP99),
				Met: t.LightVsHeavyWaitP99 <= targetLightVsHeavyWait,
			},
			verdict{
				Target:   "two tenants: the light tenant gets 0 queue_full",
				Measured: fmt.Sprintf("%d (heavy tenant: %d)", t.LightQueueFull, t.Heavy.Queue.QueueFull),
				Met:      t.LightQueueFull == 0,
			})
	}
	if s := r.Streams; s != nil {
		leaked, anon := 0, int64(0)
		for _, p := range s.Phases {
			leaked, anon = max(leaked, p.LeasesAfter), max(anon, p.PeakAnonKiB)
		}
		out = append(out,
			verdict{
				Target:   "1000 concurrent SSE streams: zero leaked leases",
				Measured: fmt.Sprintf("%d leases left (worst phase)", leaked),
				Met:      leaked == 0,
			},
			verdict{
				Target:   fmt.Sprintf("1000 concurrent SSE streams: anonymous RSS ≤ %d MiB", targetStreamsRSSMiB),
				Measured: fmt.Sprintf("peak %.1f MiB sampled (worst phase); peak RSS %.1f MiB with the binary's pages (VmHWM)", mib(anon), mib(s.HWMKiB)),
				Met:      mib(anon) <= targetStreamsRSSMiB,
			})
	}
	if s := r.Streams5000; s != nil {
		leaked, failed := 0, 0
		for _, p := range s.Phases {
			leaked, failed = max(leaked, p.LeasesAfter), failed+p.Failed
		}
		out = append(out, verdict{
			Target:   "5000 concurrent SSE streams: zero leaked leases (RSS published, no target)",
			Measured: fmt.Sprintf("%d leases left; peak %.1f MiB (VmHWM); %d streams failed", leaked, mib(s.HWMKiB), failed),
			Met:      leaked == 0,
		})
	}
	return out
}

// writeResults writes results.json, summary.md and the charts.
func writeResults(env *runEnv, r *results) error {
	r.Verdicts = r.verdicts()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.opts.out, "results.json"), append(b, '\n'), 0o600); err != nil {
		return err
	}
	return render(env.opts.out, r, env.stderr)
}

// render writes summary.md and the charts of r into dir and prints the
// summary.
func render(dir string, r *results, stderr io.Writer) error {
	if err := writeCharts(dir, r); err != nil {
		return err
	}
	md := summaryMarkdown(r)
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(md), 0o600); err != nil {
		return err
	}
	fmt.Fprint(stderr, "\n"+md)
	return nil
}

// rerender reads dir/results.json of an earlier run and writes its
// summary.md and charts again, without measuring anything.
func rerender(dir string, stderr io.Writer) error {
	r, err := readResults(dir)
	if err != nil {
		return err
	}
	r.Verdicts = r.verdicts()
	return render(dir, r, stderr)
}

// readResults reads dir/results.json of an earlier run.
func readResults(dir string) (*results, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json")) //nolint:gosec // the results directory the caller named.
	if err != nil {
		return nil, err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	return &r, nil
}

// keptRun names the earlier run some scenarios' results come from.
type keptRun struct {
	// Date and Commit are that run's.
	Date string `json:"date"`
	// Commit is the commit that run measured.
	Commit string `json:"commit"`
	// Scenarios are the keys of the scenarios kept from it.
	Scenarios []string `json:"scenarios"`
}

// keepResults copies into cur the results of every scenario that did not
// run (ran[key] false) and that prev has, with their CPU and load average
// records, and notes in cur.Meta.Kept the run each came from: prev's, or
// the earlier run prev had itself kept it from.
func keepResults(cur, prev *results, ran map[string]bool) {
	fields := map[string]func(dst, src *results) bool{
		"core":        func(d, s *results) bool { d.Core = s.Core; return s.Core != nil },
		"overhead":    func(d, s *results) bool { d.Overhead = s.Overhead; return s.Overhead != nil },
		"hidden":      func(d, s *results) bool { d.Hidden = s.Hidden; return s.Hidden != nil },
		"latebinding": func(d, s *results) bool { d.Late = s.Late; return s.Late != nil },
		"tenants":     func(d, s *results) bool { d.Tenants = s.Tenants; return s.Tenants != nil },
		"streams": func(d, s *results) bool {
			d.Streams, d.Streams5000 = s.Streams, s.Streams5000
			d.StreamsBaseline, d.Streams5000Baseline = s.StreamsBaseline, s.Streams5000Baseline
			return s.Streams != nil || s.Streams5000 != nil
		},
	}
	var kept []keptRun
	origin := func(key string) *keptRun {
		date, commit := prev.Meta.Date, prev.Meta.Commit
		for _, k := range prev.Meta.Kept {
			if slices.Contains(k.Scenarios, key) {
				date, commit = k.Date, k.Commit
			}
		}
		for i := range kept {
			if kept[i].Date == date && kept[i].Commit == commit {
				return &kept[i]
			}
		}
		kept = append(kept, keptRun{Date: date, Commit: commit})
		return &kept[len(kept)-1]
	}
	for _, key := range scenarioNames {
		if ran[key] || !fields[key](cur, prev) {
			continue
		}
		o := origin(key)
		o.Scenarios = append(o.Scenarios, key)
		title := scenarioTitles[key]
		for _, u := range prev.Meta.CPU {
			if u.Scenario == title {
				cur.Meta.CPU = append(cur.Meta.CPU, u)
			}
		}
		for _, l := range prev.Meta.LoadAvg {
			if l.At == "before "+title {
				cur.Meta.LoadAvg = append(cur.Meta.LoadAvg, l)
			}
		}
	}
	cur.Meta.Kept = kept
}

// summaryMarkdown renders the tables and verdicts.
func summaryMarkdown(r *results) string {
	var b strings.Builder
	m := r.Meta
	fmt.Fprintf(&b, "# sluice benchmark results\n\n")
	fmt.Fprintf(&b, "Run %s, commit %s (plus the work tree at that time), %s, %d CPUs, %s; %s; %s. ",
		m.Date, m.Commit, m.GoVersion, m.CPUs, m.Kernel, m.HAProxy, m.Wrk)
	fmt.Fprintf(&b, "Every process (load generator, router, engines, HAProxy) ran on this one 2-core machine, "+
		"which other engineers' builds and tests share (the CPU table below shows how much they used during this run); load averages: ")
	var la []string
	for _, l := range m.LoadAvg {
		la = append(la, fmt.Sprintf("%s %s", l.At, l.LoadAvg))
	}
	fmt.Fprintf(&b, "%s. Wall time %.0f s.\n\n", strings.Join(la, "; "), m.WallSeconds)
	if bl := m.Baseline; bl != nil {
		fmt.Fprintf(&b, "Baseline: the rows and sections named `sluice@%s` measure the router built from `-baseline %s` (commit %s), "+
			"measured in this run beside the work tree's router (in the same overhead rounds; after it in each streams run); no target judges them.\n\n", bl.Commit, bl.Revision, bl.Commit)
	}
	for _, k := range m.Kept {
		fmt.Fprintf(&b, "Kept from the run of %s, commit %s (`-keep`; not measured in this run): %s.\n\n", k.Date, k.Commit, strings.Join(k.Scenarios, ", "))
	}
	if len(m.CPU) > 0 {
		b.WriteString("CPU time per scenario (from /proc/stat and the benchmark processes' own usage): \"other\" is what processes outside the benchmark used, as a share of the machine's capacity. " +
			"It is approximate: the kernel's tick-based totals and the processes' own accounting differ by several percent, so a small share reads as 0.\n\n")
		b.WriteString("| scenario | wall | machine busy | benchmark processes | other | other share |\n|---|---:|---:|---:|---:|---:|\n")
		for _, u := range m.CPU {
			fmt.Fprintf(&b, "| %s | %.0f s | %.0f CPU·s | %.0f CPU·s | %.0f CPU·s | %.0f %% |\n",
				u.Scenario, u.WallSeconds, u.MachineBusySeconds, u.BenchSeconds, u.OtherSeconds, 100*u.OtherShare)
		}
		b.WriteString("\n")
	}

	if c := r.Core; c != nil {
		fmt.Fprintf(&b, "## Admission core (Go benchmarks)\n\n`%s`; medians of %d runs.\n\n", c.Command, coreCount)
		b.WriteString("| benchmark | ns/op | B/op | allocs/op |\n|---|---:|---:|---:|\n")
		for _, row := range c.Rows {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f |\n", row.Name, row.NsPerOp, row.BytesPerOp, row.AllocsPerOp)
		}
		b.WriteString("\n")
	}
	if o := r.Overhead; o != nil {
		fmt.Fprintf(&b, "## Proxy overhead (wrk, small non-streaming chat request, instant enginesim)\n\n")
		fmt.Fprintf(&b, "Medians over %d alternating rounds of %.0f s runs; \"added\" is the median of the same-round differences to direct; "+
			"the HAProxy ratio is the median of the same-round ratios.\n\n", o.Rounds, o.RunSeconds)
		b.WriteString("| system | c=1 p50 | c=1 p99 | added p50 | added p99 | c=1 req/s | c=32 req/s | c=32 vs HAProxy | proxy CPU per request (c=32) |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range o.Summary.Rows {
			cpu := "—"
			if row.CPUPerRequestUS > 0 {
				cpu = fmt.Sprintf("%.0f µs", row.CPUPerRequestUS)
			}
			fmt.Fprintf(&b, "| %s | %.0f µs | %.0f µs | %+.0f µs | %+.0f µs | %.0f | %.0f | %.2f× | %s |\n",
				row.Name, row.P50US, row.P99US, row.AddedP50US, row.AddedP99US, row.RPS1, row.RPS32, row.VsHAProxy, cpu)
		}
		b.WriteString("\n")
		if p := o.Profile; p != nil {
			fmt.Fprintf(&b, "Where the router's CPU went: a %.0f s CPU profile (`%s`) of %s at 32 connections, %d requests, %.2f CPU·s sampled; "+
				"each sample is given to the innermost frame an area claims (the collector wherever it is on the stack).\n\n",
				p.Seconds, p.File, p.System, p.Requests, p.CPUSeconds)
			b.WriteString("| area | share | CPU per request |\n|---|---:|---:|\n")
			for _, a := range p.Areas {
				fmt.Fprintf(&b, "| %s | %.1f %% | %.1f µs |\n", a.Area, 100*a.Share, a.USPerRequest)
			}
			b.WriteString("\n")
		}
		if sc := o.Syscalls; sc != nil {
			writeSyscallsMarkdown(&b, sc, o.Summary.Rows)
		}
	}
	if h := r.Hidden; h != nil {
		fmt.Fprintf(&b, "## Hidden load (internal/loadgen, streaming chat, open loop)\n\n")
		fmt.Fprintf(&b, "%s. Poisson arrivals at %.0f req/s for %.0f s per run, the same schedule for every system within a round; "+
			"medians over %d alternating rounds. Overshoot: most requests inside one engine at once minus its ceiling (%d), from the engines' /debug/stats, reset before every run.\n\n",
			h.Engines, h.Rate, h.RunSeconds, h.Rounds, hiddenCeiling)
		b.WriteString("| system | TTFT p50 | TTFT p99 | e2e p50 | e2e p99 | busy engine's share | max overshoot | requests/run |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range h.Summary.Rows {
			fmt.Fprintf(&b, "| %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.1f %% | %d | %d |\n",
				row.Name, row.TTFTP50, row.TTFTP99, row.E2EP50, row.E2EP99, 100*row.Busy, row.MaxOver, row.Requests)
		}
		fmt.Fprintf(&b, "\nCapacity e2e p99 / RoundRobin: %.2f×; Capacity e2e p99 / HAProxy leastconn: %.2f× (medians of same-round ratios).\n\n",
			h.Summary.CapacityVsRoundRobinP99, h.Summary.CapacityVsHAProxyP99)
	}
	if l := r.Late; l != nil {
		writeLateMarkdown(&b, l)
	}
	if t := r.Tenants; t != nil {
		writeTenantsMarkdown(&b, t)
	}
	for _, s := range []*streamsResult{r.Streams, r.StreamsBaseline, r.Streams5000, r.Streams5000Baseline} {
		if s == nil {
			continue
		}
		router := "one router"
		if s.Router != "" {
			router = "the baseline router, " + s.Router
		}
		fmt.Fprintf(&b, "## %d concurrent SSE streams through %s (Capacity tier, 3 engines)\n\n", s.Streams, router)
		goroutines := "not exposed by the router's /metrics"
		if s.GoroutinesExposed && s.GoroutinesIdle != nil {
			goroutines = fmt.Sprintf("%.0f", *s.GoroutinesIdle)
		}
		fmt.Fprintf(&b, "Router idle before the streams: RSS %.1f MiB (%.1f MiB of it the pages of files it maps, its binary's), %d threads, goroutines %s.\n\n",
			mib(s.Idle.RSSKiB), mib(s.Idle.FileKiB), s.Idle.Threads, goroutines)
		b.WriteString("| streams | completed | cut by client | peak leases | peak RSS | peak anonymous RSS | leases after | engine in-flight after | RSS after | threads after | goroutines peak / after | TTFT p50 / p99 |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, p := range s.Phases {
			g := "not exposed"
			if p.GoroutinesPeak != nil && p.GoroutinesAfter != nil {
				g = fmt.Sprintf("%.0f / %.0f", *p.GoroutinesPeak, *p.GoroutinesAfter)
			}
			ttft := "—"
			if p.Succeeded > 0 {
				ttft = fmt.Sprintf("%.0f / %.0f ms", p.TTFTP50MS, p.TTFTP99MS)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f MiB | %.1f MiB | %d | %d | %.1f MiB | %d | %s | %s |\n",
				p.Name, p.Succeeded, p.TimedOut, p.PeakActive, mib(p.PeakRSSKiB), mib(p.PeakAnonKiB), p.LeasesAfter, p.EngineInFlightAfter,
				mib(p.After.RSSKiB), p.After.Threads, g, ttft)
		}
		for _, p := range s.Phases {
			if p.Failed > 0 {
				fmt.Fprintf(&b, "\n%d of the %s streams failed: client errors %v, statuses %v; the router's decision log (its last records): refusals %v, admitted exchanges by outcome %v.\n",
					p.Failed, p.Name, p.ClientErrors, p.Statuses, p.Refusals, p.Outcomes)
			}
		}
		for _, p := range s.Phases {
			if h := p.Heap; h != nil {
				fmt.Fprintf(&b, "\nOnce all %d streams were open (%s phase; heap profile `%s`, after a forced collection): "+
					"live heap %.1f MiB, goroutine stacks %.1f MiB (%.1f KiB per stream), next collection at %.1f MiB of heap, "+
					"%.1f MiB obtained from the kernel by the Go runtime. Largest allocation sites of the live heap: %s.\n",
					s.Streams, p.Name, h.File, h.LiveMiB, h.StackInuseMiB, h.StackInuseMiB*1024/float64(s.Streams), h.NextGCMiB, h.SysMiB, heapSitesText(h.Sites, 6))
			}
		}
		fmt.Fprintf(&b, "\nRouter peak RSS over the whole scenario (VmHWM): %.1f MiB.\n\n", mib(s.HWMKiB))
	}
	if len(r.Verdicts) > 0 {
		b.WriteString("## Verdicts\n\nAgainst the targets of docs/BENCHMARKS.md#targets.\n\n| target | measured | verdict |\n|---|---|---|\n")
		for _, v := range r.Verdicts {
			verdict := "**not met**"
			if v.Met {
				verdict = "met"
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", v.Target, v.Measured, verdict)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeLateMarkdown renders the late binding scenario's section.
func writeLateMarkdown(b *strings.Builder, l *lateResult) {
	fmt.Fprintf(b, "## Late binding (internal/loadgen, streaming chat, open loop: a burst, then less)\n\n")
	fmt.Fprintf(b, "%s. Poisson arrivals at %.0f req/s for %.0f s, then %.0f req/s for %.0f s, the same schedule (seeds) for every configuration within a round; "+
		"(a) has ceilings at the engines' --max-num-seqs (%d) and a %s; (b) and (c) have ceilings of %d, above the engines' slots, so the excess waits inside the engines. "+
		"Medians over %d alternating round(s). Refused: the responses outside 2xx by status and error code, as the client read them.\n\n",
		l.Engines, l.BurstRate, l.BurstSeconds, l.LullRate, l.LullSeconds, lateMaxNumSeqs, l.Queue, lateOvercommitCeiling, l.Rounds)
	b.WriteString("| configuration | TTFT p50 | TTFT p99 | e2e p50 | e2e p99 | refused | busy engine's share | most in one engine | requests/run |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, row := range l.Summary.Rows {
		fmt.Fprintf(b, "| %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %s | %.1f %% | %d | %d |\n",
			row.Name, row.TTFTP50, row.TTFTP99, row.E2EP50, row.E2EP99, refusalsText(row.Refusals), 100*row.Busy, row.MaxEngineInFlight, row.Requests)
	}
	fmt.Fprintf(b, "\n(a) e2e p99 / (b): %.2f×; (a) / (c): %.2f× (medians of same-round ratios).\n\n",
		l.Summary.QueueVsEngineQueueP99, l.Summary.QueueVsRoundRobinP99)
}

// writeTenantsMarkdown renders the two-tenant scenario's section.
func writeTenantsMarkdown(b *strings.Builder, t *tenantResult) {
	fmt.Fprintf(b, "## Two tenants (internal/loadgen, streaming chat, open loop, one API key each)\n\n")
	fmt.Fprintf(b, "%s; %s. Both tenants' Poisson arrivals run at once for %.0f s, the heavy tenant at %.0f req/s, the light one at %.1f. "+
		"Queued is the router's own time in the admission queue (the decision record's queued_us, joined to each response by its X-Request-Id) "+
		"of every request that did not meet a full queue: a request admitted at once counts as 0; waited counts those that queued at all. "+
		"queue_full is counted from the records and equals the client's 429 queue_full count. "+
		"Headers is the client's time to response headers of the requests that succeeded: the time queued plus the proxy's own "+
		"(enginesim sends a stream's headers before it takes a slot, so no engine time is in it).\n\n",
		t.Queue, t.Engines, t.RunSeconds, t.Heavy.Rate, t.Light.Rate)
	b.WriteString("| tenant | rate | sent | succeeded | queued p50 | queued p99 | waited | queue_full (records) | headers p50 | headers p99 | e2e p99 | refused (client) |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range []tenantRow{t.Heavy, t.Light} {
		fmt.Fprintf(b, "| %s | %.1f req/s | %d | %d | %.0f ms | %.0f ms | %d of %d | %d | %.0f ms | %.0f ms | %.0f ms | %s |\n",
			row.Tenant, row.Rate, row.Sent, row.Succeeded,
			loadgen.Milliseconds(row.Queue.Wait.P50), loadgen.Milliseconds(row.Queue.Wait.P99), row.Queue.Waited, row.Queue.Wait.Count, row.Queue.QueueFull,
			loadgen.Milliseconds(row.Headers.P50), loadgen.Milliseconds(row.Headers.P99), loadgen.Milliseconds(row.E2E.P99), refusalsText(row.Refusals))
	}
	fmt.Fprintf(b, "\nLight tenant's p99 time queued / heavy tenant's: %.2f× (client's time to headers: %.2f×); light tenant's queue_full: %d.\n\n",
		t.LightVsHeavyWaitP99, t.LightVsHeavyHeadersP99, t.LightQueueFull)
}

// refusalsText renders refusal counts in key order, "0" when there are
// none.
func refusalsText(m map[string]int) string {
	if countOf(m) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d × %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
