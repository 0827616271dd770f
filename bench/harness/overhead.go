//go:build linux

package main

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/supervise"
)

// Scenario 1 (proxy overhead) constants.
const (
	// overheadEngines is the number of instant enginesim members.
	overheadEngines = 3
	// overheadCeiling is every member's router ceiling and HAProxy maxconn:
	// equal to the saturation concurrency, so neither proxy refuses or
	// queues at 32 connections whatever the distribution.
	overheadCeiling = 32
	// overheadMaxNumSeqs is the engines' slots: above the ceiling, so an
	// instant engine never queues a request.
	overheadMaxNumSeqs = 64
	// saturationConns is the connection count of the throughput runs
	// (docs/BENCHMARKS.md#targets).
	saturationConns = 32
	// saturationThreads is wrk's thread count at saturation, one per core
	// of the 2-core machine.
	saturationThreads = 2
	// warmupDuration is the unrecorded wrk run per system and concurrency
	// before the first round: it opens the proxies' upstream connections
	// and lets the Capacity tier's pressure samples become fresh.
	warmupDuration = 2 * time.Second
)

// overheadBody is the small non-streaming request every system gets; the
// model names have equal lengths, so the bodies have equal sizes.
func overheadBody(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`
}

// overheadSystem is one system under test in scenario 1.
type overheadSystem struct {
	// Name is the row label.
	Name string `json:"name"`
	// Baseline marks the router built from -baseline, which no target
	// judges.
	Baseline bool `json:"baseline,omitempty"`
	// URL is the chat completions URL wrk targets.
	URL string `json:"-"`
	// root is the OpenAI API root of the URL, and model the request's
	// model, for the system call phase's load.
	root, model string
	// script is the wrk Lua script's path.
	script string
	// router is the router when the system is one of its tiers: its Go
	// metrics count allocations, and capacityTier is primed on it.
	router *routerProc
	// capacityTier is the tier key when this is the Capacity tier, whose
	// pressure is primed before every run.
	capacityTier string
	// proc is the proxy's process, whose CPU time the saturation runs
	// count; nil for direct.
	proc *supervise.Process
	// C1 and C32 are the per-round results at concurrency 1 and 32.
	C1 []wrkResult `json:"c1"`
	// C32 is the per-round results at 32 connections.
	C32 []wrkResult `json:"c32"`
	// C32CPUUS is the proxy's CPU time per request in each round's
	// saturation run, in microseconds; empty for direct.
	C32CPUUS []float64 `json:"c32_cpu_us_per_request,omitempty"`
}

// overheadResult is scenario 1's measurements and summary.
type overheadResult struct {
	// Rounds is the number of alternating rounds.
	Rounds int `json:"rounds"`
	// RunSeconds is the duration of each wrk run.
	RunSeconds float64 `json:"run_seconds"`
	// Systems holds the raw per-round results.
	Systems []*overheadSystem `json:"systems"`
	// Summary holds the medians and ratios.
	Summary overheadSummary `json:"summary"`
	// Commands are the exact commands run, with placeholders for ports.
	Commands []string `json:"commands"`
	// Profile is where the router spent its CPU in one more saturation run
	// of the Capacity tier, after the rounds.
	Profile *profileResult `json:"profile,omitempty"`
	// Syscalls is the system call phase, after the profile: every proxy's
	// system calls (and a router's allocations) per request.
	Syscalls *syscallResult `json:"syscalls,omitempty"`
}

// overheadRow is one system's medians.
type overheadRow struct {
	// Name is the system.
	Name string `json:"name"`
	// Baseline marks the router built from -baseline, which no target
	// judges.
	Baseline bool `json:"baseline,omitempty"`
	// P50US and P99US are the medians over rounds of the concurrency-1
	// latencies.
	P50US float64 `json:"p50_us"`
	// P99US is the median 99th percentile at concurrency 1.
	P99US float64 `json:"p99_us"`
	// AddedP50US and AddedP99US are the medians over rounds of the
	// difference to direct measured in the same round (zero for direct).
	AddedP50US float64 `json:"added_p50_us"`
	// AddedP99US is the median added 99th percentile.
	AddedP99US float64 `json:"added_p99_us"`
	// RPS1 is the median throughput at concurrency 1.
	RPS1 float64 `json:"rps_c1"`
	// RPS32 is the median throughput at 32 connections.
	RPS32 float64 `json:"rps_c32"`
	// VsHAProxy is the median over rounds of RPS32 / HAProxy's RPS32 in
	// the same round.
	VsHAProxy float64 `json:"rps_c32_vs_haproxy"`
	// CPUPerRequestUS is the median over rounds of the proxy's CPU time per
	// request at 32 connections (user and system, from /proc/PID/stat);
	// zero for direct. On a 2-core machine saturated by the load
	// generator, the proxy and the engines, it is what decides throughput.
	CPUPerRequestUS float64 `json:"cpu_us_per_request_c32"`
}

// overheadSummary is scenario 1's table.
type overheadSummary struct {
	// Rows has one entry per system, in run order.
	Rows []overheadRow `json:"rows"`
}

// runOverhead runs scenario 1.
func runOverhead(env *runEnv) (*overheadResult, error) {
	sup, o := env.sup, env.opts
	zero := engineOptions{MaxNumSeqs: overheadMaxNumSeqs, OutputTokens: 1}
	engines, err := sup.startEngines(env.enginesim, "overhead", overheadEngines, zero, nil)
	if err != nil {
		return nil, err
	}
	procs := procsOf(engines)
	defer func() { stopGroup(procs) }()
	rt, hp, err := sup.startRouterAndHAProxy(env, "overhead", engines, overheadCeiling, false, &procs)
	if err != nil {
		return nil, err
	}
	bare, err := sup.startBareProxy(env.bareproxy, "overhead-bareproxy", engines)
	if err != nil {
		return nil, err
	}
	procs = append(procs, bare.proc)

	var base *routerProc
	if b := env.baseline; b != nil {
		// The same tiers as the work tree's router, over the same engines.
		if base, err = sup.startRouter(b.bin, "overhead-baseline-router", env.dir("overhead-baseline-tiers"), twoTiers(engines, overheadCeiling)); err != nil {
			return nil, err
		}
		procs = append(procs, base.proc)
	}

	systems := overheadSystems(engines[0].url()+"/v1", rt, base, env.baseline, bare, hp)
	for i, s := range systems {
		if s.script, err = writeWrkScript(env.workDir, fmt.Sprintf("overhead-%d", i), overheadBody(s.model)); err != nil {
			return nil, err
		}
	}
	res := &overheadResult{Rounds: o.overheadRounds, RunSeconds: o.overheadRun.Seconds(), Systems: systems}
	res.Commands = []string{
		fmt.Sprintf("wrk -t 1 -c 1 -d %ds --latency -s SCRIPT URL", int(o.overheadRun.Seconds())),
		fmt.Sprintf("wrk -t %d -c %d -d %ds --latency -s SCRIPT URL", saturationThreads, saturationConns, int(o.overheadRun.Seconds())),
		"SCRIPT: " + wrkScript(overheadBody("MODEL")),
	}

	run := func(s *overheadSystem, label string, conns, threads int, d time.Duration) (wrkResult, error) {
		if s.capacityTier != "" {
			if err := primeCapacity(env, s.router, s.capacityTier); err != nil {
				return wrkResult{}, err
			}
		}
		env.progress("overhead: %s, %d connection(s), %v", s.Name, conns, d)
		return runWrk(sup.ctx, sup, label, wrkRun{URL: s.URL, Script: s.script, Threads: threads, Connections: conns, Duration: d})
	}
	for i, s := range systems {
		if _, err := run(s, fmt.Sprintf("overhead-warmup-%d-c1", i), 1, 1, warmupDuration); err != nil {
			return nil, err
		}
		if _, err := run(s, fmt.Sprintf("overhead-warmup-%d-c32", i), saturationConns, saturationThreads, warmupDuration); err != nil {
			return nil, err
		}
	}
	for r := range o.overheadRounds {
		for i, s := range systems {
			w, err := run(s, fmt.Sprintf("overhead-r%d-%d-c1", r+1, i), 1, 1, o.overheadRun)
			if err != nil {
				return nil, err
			}
			s.C1 = append(s.C1, w)
		}
		for i, s := range systems {
			var before time.Duration
			if s.proc != nil {
				if before, err = processCPU(s.proc.Pid()); err != nil {
					return nil, err
				}
			}
			w, err := run(s, fmt.Sprintf("overhead-r%d-%d-c32", r+1, i), saturationConns, saturationThreads, o.overheadRun)
			if err != nil {
				return nil, err
			}
			s.C32 = append(s.C32, w)
			if s.proc != nil {
				after, err := processCPU(s.proc.Pid())
				if err != nil {
					return nil, err
				}
				s.C32CPUUS = append(s.C32CPUUS, cpuPerRequestUS(after-before, w.Requests))
			}
		}
	}
	if res.Profile, err = profileRouter(env, rt, systems[2], max(2*int(o.overheadRun.Seconds()), 2)); err != nil {
		return nil, err
	}
	if res.Syscalls, err = countSyscalls(env, systems); err != nil {
		return nil, err
	}
	for _, r := range []*routerProc{rt, base} {
		if r == nil {
			continue
		}
		if err := requireIdleRouter(env, r); err != nil {
			return nil, err
		}
	}
	res.Summary, err = summarizeOverhead(systems)
	return res, err
}

// overheadSystems are scenario 1's systems in run order: direct (the
// engine at engineRoot), the router's RoundRobin and Capacity tiers, the
// baseline router's (when base is not nil), the bare proxy and HAProxy,
// last, as summarizeOverhead wants it. The model names have equal lengths,
// so every system gets request bodies of the same size.
func overheadSystems(engineRoot string, rt, base *routerProc, b *baselineRouter, bare, hp *haproxyProc) []*overheadSystem {
	const path = "/chat/completions"
	routerSystems := func(label string, r *routerProc, baseline bool) []*overheadSystem {
		return []*overheadSystem{
			{Name: label + " RoundRobin", Baseline: baseline, root: r.url(), model: aliasRoundRobin, router: r, proc: r.proc},
			{Name: label + " Capacity", Baseline: baseline, root: r.url(), model: aliasCapacity, router: r, capacityTier: r.capacityTier(), proc: r.proc},
		}
	}
	systems := []*overheadSystem{{Name: "direct", root: engineRoot, model: benchModel}}
	systems = append(systems, routerSystems("sluice", rt, false)...)
	if base != nil {
		systems = append(systems, routerSystems(b.label(), base, true)...)
	}
	systems = append(systems,
		&overheadSystem{Name: bareProxyName, root: bare.url(), model: benchModel, proc: bare.proc},
		&overheadSystem{Name: "HAProxy leastconn", root: hp.url(), model: benchModel, proc: hp.proc})
	for _, s := range systems {
		s.URL = s.root + path
	}
	return systems
}

// summarizeOverhead computes scenario 1's medians and paired ratios. The
// first system is direct, the last HAProxy.
func summarizeOverhead(systems []*overheadSystem) (overheadSummary, error) {
	var sum overheadSummary
	if len(systems) < 2 {
		return sum, fmt.Errorf("overhead: %w", errNoSamples)
	}
	direct, hap := systems[0], systems[len(systems)-1]
	p50 := func(w wrkResult) float64 { return w.P50US }
	p99 := func(w wrkResult) float64 { return w.P99US }
	rps := func(w wrkResult) float64 { return w.RPS }
	series := func(ws []wrkResult, f func(wrkResult) float64) []float64 {
		out := make([]float64, len(ws))
		for i, w := range ws {
			out[i] = f(w)
		}
		return out
	}
	for _, s := range systems {
		row := overheadRow{Name: s.Name, Baseline: s.Baseline}
		var err error
		if row.P50US, err = medianOf(s.C1, p50); err != nil {
			return sum, fmt.Errorf("%s p50: %w", s.Name, err)
		}
		if row.P99US, err = medianOf(s.C1, p99); err != nil {
			return sum, fmt.Errorf("%s p99: %w", s.Name, err)
		}
		if row.RPS1, err = medianOf(s.C1, rps); err != nil {
			return sum, fmt.Errorf("%s rps c1: %w", s.Name, err)
		}
		if row.RPS32, err = medianOf(s.C32, rps); err != nil {
			return sum, fmt.Errorf("%s rps c32: %w", s.Name, err)
		}
		d50, err := pairedDifferences(series(s.C1, p50), series(direct.C1, p50))
		if err != nil {
			return sum, err
		}
		d99, err := pairedDifferences(series(s.C1, p99), series(direct.C1, p99))
		if err != nil {
			return sum, err
		}
		vs, err := pairedRatios(series(s.C32, rps), series(hap.C32, rps))
		if err != nil {
			return sum, err
		}
		if row.AddedP50US, err = median(d50); err != nil {
			return sum, err
		}
		if row.AddedP99US, err = median(d99); err != nil {
			return sum, err
		}
		if row.VsHAProxy, err = median(vs); err != nil {
			return sum, err
		}
		if len(s.C32CPUUS) > 0 {
			if row.CPUPerRequestUS, err = median(s.C32CPUUS); err != nil {
				return sum, err
			}
		}
		sum.Rows = append(sum.Rows, row)
	}
	return sum, nil
}

// cpuPerRequestUS divides a process's CPU time over a run by the requests
// the run completed, in microseconds; zero without requests.
func cpuPerRequestUS(cpu time.Duration, requests int) float64 {
	if requests <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(requests)
}
