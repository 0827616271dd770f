//go:build linux

package main

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// Scenario 2 (hidden load) constants. The engines model a small batch so
// that one engine's hidden load matters: each has 8 slots and the busy one
// has 6 of them held by external traffic the router cannot see.
const (
	// hiddenEngines is the number of engines.
	hiddenEngines = 3
	// hiddenBusy is the index of the engine with hidden load.
	hiddenBusy = 2
	// hiddenMaxNumSeqs is every engine's slot count.
	hiddenMaxNumSeqs = 8
	// hiddenLoad is the busy engine's permanently held slots.
	hiddenLoad = 6
	// hiddenCeiling is every member's router ceiling and HAProxy maxconn:
	// the engines' slot count, as an operator would declare it.
	hiddenCeiling = hiddenMaxNumSeqs
	// hiddenOutputTokens is the tokens every request generates: with the
	// default enginesim latencies a request takes about 0.4 s on an idle
	// engine and 0.6 s on the busy one.
	hiddenOutputTokens = 32
	// hiddenRequestTimeout bounds one request; nothing near it is expected.
	hiddenRequestTimeout = 60 * time.Second
	// hiddenMaxInFlight bounds the open loop's requests in flight, far
	// above the three engines' 24 ceilings (HAProxy queues the excess).
	hiddenMaxInFlight = 512
)

// hiddenSystem is one system under test in scenario 2.
type hiddenSystem struct {
	// Name is the row label.
	Name string `json:"name"`
	// baseURL and model are what loadgen sends to.
	baseURL, model string
	// capacityTier is the tier key when this is the Capacity tier.
	capacityTier string
	// Runs are the per-round measurements.
	Runs []hiddenRun `json:"runs"`
}

// hiddenRun is one measured run of one system.
type hiddenRun struct {
	// Sent and Succeeded count requests.
	Sent int `json:"sent"`
	// Succeeded counts complete streams.
	Succeeded int `json:"succeeded"`
	// TTFT and E2E are loadgen's summaries (milliseconds in JSON).
	TTFT loadgen.Summary `json:"ttft"`
	// E2E is the end-to-end latency summary.
	E2E loadgen.Summary `json:"e2e"`
	// EngineRequests counts the inference requests each engine served.
	EngineRequests []int `json:"engine_requests"`
	// EngineMaxInFlight is each engine's most requests inside a handler at
	// once during the run.
	EngineMaxInFlight []int `json:"engine_max_in_flight"`
	// Overshoot is max(0, max in flight − member ceiling) over the engines.
	Overshoot int `json:"overshoot"`
	// BusyShare is the busy engine's share of the requests.
	BusyShare float64 `json:"busy_share"`
}

// hiddenResult is scenario 2's measurements and summary.
type hiddenResult struct {
	// Rounds is the number of alternating rounds.
	Rounds int `json:"rounds"`
	// RunSeconds is the open loop's duration per run.
	RunSeconds float64 `json:"run_seconds"`
	// Rate is the mean arrival rate, requests per second.
	Rate float64 `json:"rate"`
	// Engines describes the engines.
	Engines string `json:"engines"`
	// Systems holds the raw per-round results.
	Systems []*hiddenSystem `json:"systems"`
	// Summary holds the medians and ratios.
	Summary hiddenSummary `json:"summary"`
}

// hiddenRow is one system's medians over rounds.
type hiddenRow struct {
	Name string `json:"name"`
	openLoopMedians
	MaxOver int `json:"max_overshoot"`
}

// hiddenSummary is scenario 2's table and the ratios its targets judge
// (docs/BENCHMARKS.md#targets; medians over rounds of the same-round
// ratios).
type hiddenSummary struct {
	Rows []hiddenRow `json:"rows"`
	// CapacityVsRoundRobinP99 is Capacity's e2e p99 over RoundRobin's.
	CapacityVsRoundRobinP99 float64 `json:"capacity_vs_roundrobin_e2e_p99"`
	// CapacityVsHAProxyP99 is Capacity's e2e p99 over HAProxy's.
	CapacityVsHAProxyP99 float64 `json:"capacity_vs_haproxy_e2e_p99"`
}

// runHiddenLoad runs scenario 2.
func runHiddenLoad(env *runEnv) (*hiddenResult, error) {
	sup, o := env.sup, env.opts
	eo := engineOptions{
		MaxNumSeqs: hiddenMaxNumSeqs, OutputTokens: hiddenOutputTokens,
		TTFTBase: 50 * time.Millisecond, TTFTPerSeq: 5 * time.Millisecond,
		ITLBase: 10 * time.Millisecond, ITLPerSeq: time.Millisecond,
	}
	engines, err := sup.startEngines(env.enginesim, "hidden", hiddenEngines, eo, map[int]int{hiddenBusy: hiddenLoad})
	if err != nil {
		return nil, err
	}
	procs := procsOf(engines)
	defer func() { stopGroup(procs) }()
	rt, hp, err := sup.startRouterAndHAProxy(env, "hidden", engines, hiddenCeiling, true, &procs)
	if err != nil {
		return nil, err
	}

	systems := []*hiddenSystem{
		{Name: "sluice RoundRobin", baseURL: rt.url(), model: aliasRoundRobin},
		{Name: "sluice Capacity", baseURL: rt.url(), model: aliasCapacity, capacityTier: rt.capacityTier()},
		{Name: "HAProxy leastconn", baseURL: hp.url(), model: benchModel},
	}
	res := &hiddenResult{
		Rounds: o.hiddenRounds, RunSeconds: o.hiddenRun.Seconds(), Rate: o.hiddenRate, Systems: systems,
		Engines: fmt.Sprintf("%d enginesim, --max-num-seqs %d, --output-tokens %d, default latencies (ttft 50ms+5ms/seq, itl 10ms+1ms/seq); engine %d --hidden-load %d",
			hiddenEngines, hiddenMaxNumSeqs, hiddenOutputTokens, hiddenBusy, hiddenLoad),
	}
	measure := func(s *hiddenSystem, seed uint64, d time.Duration) (hiddenRun, error) {
		if s.capacityTier != "" {
			if err := primeCapacity(env, rt, s.capacityTier); err != nil {
				return hiddenRun{}, err
			}
		}
		if err := sup.waitEnginesIdle(engines); err != nil {
			return hiddenRun{}, err
		}
		for _, e := range engines {
			if err := e.reset(sup.ctx); err != nil {
				return hiddenRun{}, err
			}
		}
		env.progress("hidden load: %s, %.0f req/s for %v", s.Name, o.hiddenRate, d)
		r, err := loadgen.Run(sup.ctx, loadgen.Config{
			BaseURL:        s.baseURL,
			Model:          s.model,
			Mode:           loadgen.OpenLoop,
			Rate:           o.hiddenRate,
			Concurrency:    hiddenMaxInFlight,
			Seed:           seed,
			Duration:       d,
			RequestTimeout: hiddenRequestTimeout,
		})
		if err != nil {
			return hiddenRun{}, err
		}
		if err := sup.err(); err != nil {
			return hiddenRun{}, err
		}
		if err := checkLoad(s.Name, r); err != nil {
			return hiddenRun{}, err
		}
		run := hiddenRun{Sent: r.Sent, Succeeded: r.Succeeded, TTFT: r.TTFT.Summary(), E2E: r.E2E.Summary()}
		total := 0
		for _, e := range engines {
			st, err := e.stats(sup.ctx)
			if err != nil {
				return hiddenRun{}, err
			}
			served := int(st.TotalRequests) //nolint:gosec // a run's requests fit an int.
			run.EngineRequests = append(run.EngineRequests, served)
			run.EngineMaxInFlight = append(run.EngineMaxInFlight, st.MaxInFlight)
			run.Overshoot = max(run.Overshoot, st.MaxInFlight-hiddenCeiling)
			total += served
		}
		if total != r.Sent {
			return hiddenRun{}, fmt.Errorf("hidden load: %s: engines served %d requests, loadgen sent %d", s.Name, total, r.Sent)
		}
		run.BusyShare = float64(run.EngineRequests[hiddenBusy]) / float64(total)
		return run, nil
	}
	for i, s := range systems {
		if _, err := measure(s, uint64(1000+i), o.hiddenWarmup); err != nil {
			return nil, err
		}
	}
	for r := range o.hiddenRounds {
		for _, s := range systems {
			// The same seed within a round gives every system the same
			// arrival schedule.
			run, err := measure(s, uint64(r+1), o.hiddenRun)
			if err != nil {
				return nil, err
			}
			s.Runs = append(s.Runs, run)
		}
	}
	if err := requireIdleRouter(env, rt); err != nil {
		return nil, err
	}
	res.Summary, err = summarizeHidden(systems)
	return res, err
}

// checkLoad fails a load run with any failed, dropped or missing request:
// its latencies would describe only the requests that went well.
func checkLoad(name string, r *loadgen.Result) error {
	switch {
	case r.Sent == 0:
		return fmt.Errorf("%s: no request was sent", name)
	case r.Failed() > 0 || r.Succeeded != r.Sent:
		return fmt.Errorf("%s: %d of %d requests failed (errors %v, statuses %v)", name, r.Sent-r.Succeeded, r.Sent, r.Errors, r.Statuses)
	case r.Dropped > 0:
		return fmt.Errorf("%s: %d arrivals dropped at the in-flight bound", name, r.Dropped)
	case r.E2E.Count() != r.Succeeded:
		return fmt.Errorf("%s: %d latency samples for %d requests", name, r.E2E.Count(), r.Succeeded)
	}
	return nil
}

// summarizeHidden computes scenario 2's medians and same-round ratios. The
// systems are RoundRobin, Capacity and HAProxy, in that order.
func summarizeHidden(systems []*hiddenSystem) (hiddenSummary, error) {
	var sum hiddenSummary
	if len(systems) != 3 {
		return sum, fmt.Errorf("hidden load: %w", errNoSamples)
	}
	for _, s := range systems {
		m, err := medianRuns(s.Runs, func(r hiddenRun) openLoopRun {
			return openLoopRun{Sent: r.Sent, TTFT: r.TTFT, E2E: r.E2E, BusyShare: r.BusyShare}
		})
		if err != nil {
			return sum, fmt.Errorf("%s: %w", s.Name, err)
		}
		row := hiddenRow{Name: s.Name, openLoopMedians: m}
		for _, r := range s.Runs {
			row.MaxOver = max(row.MaxOver, r.Overshoot)
		}
		sum.Rows = append(sum.Rows, row)
	}
	p99 := func(s *hiddenSystem) []float64 {
		out := make([]float64, len(s.Runs))
		for i, r := range s.Runs {
			out[i] = loadgen.Milliseconds(r.E2E.P99)
		}
		return out
	}
	vsRR, err := pairedRatios(p99(systems[1]), p99(systems[0]))
	if err != nil {
		return sum, err
	}
	vsHAP, err := pairedRatios(p99(systems[1]), p99(systems[2]))
	if err != nil {
		return sum, err
	}
	if sum.CapacityVsRoundRobinP99, err = median(vsRR); err != nil {
		return sum, err
	}
	if sum.CapacityVsHAProxyP99, err = median(vsHAP); err != nil {
		return sum, err
	}
	return sum, nil
}
