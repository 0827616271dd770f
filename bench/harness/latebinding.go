//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// Late binding scenario constants. The engines are the hidden load
// scenario's: 8 slots each, the busy one with 6 of them held by load the
// router cannot see, so the three engines have 18 free slots while the
// members declare 24.
const (
	// lateEngines is the number of engines.
	lateEngines = 3
	// lateBusy is the index of the engine with hidden load.
	lateBusy = 2
	// lateMaxNumSeqs is every engine's slot count, and every member's
	// ceiling in the queue's tier: the ceiling an operator sets at the
	// engine's real batch capacity.
	lateMaxNumSeqs = 8
	// lateHiddenLoad is the busy engine's permanently held slots.
	lateHiddenLoad = 6
	// lateOutputTokens is the tokens every request generates (about 0.4 s
	// on an idle engine, 0.7 s in a full batch).
	lateOutputTokens = 32
	// lateOvercommitCeiling is every member's ceiling in the tiers without
	// a queue: far above the engines' 8 slots, so the router never refuses
	// and the excess waits inside the engines, as with ceilings set above
	// engine capacity.
	lateOvercommitCeiling = 64
	// lateQueueMax is the queue's maxRequests: above any backlog the burst
	// can build (the burst sends a few hundred requests in all).
	lateQueueMax = 1000
	// lateQueueWait is the queue's maxWait: the backlog of a burst at the
	// default rates drains within seconds, so 60 s covers it.
	lateQueueWait = 60 * time.Second
	// lateMaxInFlight bounds each load phase's requests in flight, far
	// above the tiers' ceilings and the queue's backlog.
	lateMaxInFlight = 2048
	// lateRequestTimeout bounds one request, queueing included.
	lateRequestTimeout = 120 * time.Second
)

// lateSystem is one configuration under test in the late binding
// scenario.
type lateSystem struct {
	// Name is the row label.
	Name string `json:"name"`
	// Tier is the tier the configuration routes through.
	Tier tierSpec `json:"-"`
	// Runs are the per-round measurements.
	Runs []lateRun `json:"runs"`
}

// lateRun is one measured run of one configuration: a burst and the lull
// after it, together.
type lateRun struct {
	// Sent counts the requests sent.
	Sent int `json:"sent"`
	// Succeeded counts complete streams.
	Succeeded int `json:"succeeded"`
	// Refusals counts the responses outside 2xx by status and code.
	Refusals map[string]int `json:"refusals"`
	// TTFT and E2E are over the requests that succeeded (milliseconds in
	// JSON).
	TTFT loadgen.Summary `json:"ttft"`
	// E2E is the end-to-end latency summary.
	E2E loadgen.Summary `json:"e2e"`
	// EngineRequests counts the inference requests each engine served.
	EngineRequests []int `json:"engine_requests"`
	// EngineMaxInFlight is each engine's most requests inside a handler at
	// once during the run, those waiting for a slot included.
	EngineMaxInFlight []int `json:"engine_max_in_flight"`
	// BusyShare is the busy engine's share of the requests served.
	BusyShare float64 `json:"busy_share"`
}

// lateResult is the late binding scenario's measurements and summary.
type lateResult struct {
	// Rounds is the number of alternating rounds.
	Rounds int `json:"rounds"`
	// BurstSeconds and BurstRate are the burst's duration and mean
	// arrival rate (Poisson).
	BurstSeconds float64 `json:"burst_seconds"`
	// BurstRate is the burst's mean arrivals per second.
	BurstRate float64 `json:"burst_rate"`
	// LullSeconds and LullRate are the same for the lower load after it.
	LullSeconds float64 `json:"lull_seconds"`
	// LullRate is the lull's mean arrivals per second.
	LullRate float64 `json:"lull_rate"`
	// Engines describes the engines.
	Engines string `json:"engines"`
	// Queue describes the queue of configuration (a).
	Queue string `json:"queue"`
	// Systems holds the raw per-round results.
	Systems []*lateSystem `json:"systems"`
	// Summary holds the medians and ratios.
	Summary lateSummary `json:"summary"`
}

// lateRow is one configuration's medians over rounds.
type lateRow struct {
	Name string `json:"name"`
	openLoopMedians
	// MaxEngineInFlight is the most requests inside one engine at once
	// over every run.
	MaxEngineInFlight int `json:"max_engine_in_flight"`
	// Refusals sums the refusals of every run by status and code.
	Refusals map[string]int `json:"refusals"`
}

// lateSummary is the late binding scenario's table and the ratios its
// targets judge (medians over rounds of the same-round ratios).
type lateSummary struct {
	Rows []lateRow `json:"rows"`
	// QueueVsEngineQueueP99 is (a)'s e2e p99 over (b)'s.
	QueueVsEngineQueueP99 float64 `json:"queue_vs_engine_queue_e2e_p99"`
	// QueueVsRoundRobinP99 is (a)'s e2e p99 over (c)'s.
	QueueVsRoundRobinP99 float64 `json:"queue_vs_roundrobin_e2e_p99"`
	// QueueRefused is the requests (a) refused over every run.
	QueueRefused int `json:"queue_refused"`
}

// lateSystems returns the three configurations over the same engines, in
// the order summarizeLate expects.
func lateSystems(engines []*engine) []*lateSystem {
	return []*lateSystem{
		{Name: "(a) Capacity + queue, ceilings = engine slots", Tier: tierSpec{
			Name: "lq", Alias: aliasLateQueue, Strategy: "Capacity", Ceiling: lateMaxNumSeqs, Engines: engines,
			Queue: &queueSpec{MaxRequests: lateQueueMax, MaxWait: lateQueueWait},
		}},
		{Name: "(b) Capacity, ceilings above engine capacity", Tier: tierSpec{
			Name: "lc", Alias: aliasLateCapacity, Strategy: "Capacity", Ceiling: lateOvercommitCeiling, Engines: engines,
		}},
		{Name: "(c) RoundRobin, ceilings above engine capacity", Tier: tierSpec{
			Name: "lr", Alias: aliasLateRoundRobin, Strategy: "RoundRobin", Ceiling: lateOvercommitCeiling, Engines: engines,
		}},
	}
}

// runLateBinding runs the late binding scenario: every configuration gets
// the same burst and lull, with the same seeds within a round.
func runLateBinding(env *runEnv) (*lateResult, error) {
	sup, o := env.sup, env.opts
	eo := engineOptions{
		MaxNumSeqs: lateMaxNumSeqs, OutputTokens: lateOutputTokens,
		TTFTBase: 50 * time.Millisecond, TTFTPerSeq: 5 * time.Millisecond,
		ITLBase: 10 * time.Millisecond, ITLPerSeq: time.Millisecond,
	}
	engines, err := sup.startEngines(env.enginesim, "late", lateEngines, eo, map[int]int{lateBusy: lateHiddenLoad})
	if err != nil {
		return nil, err
	}
	procs := procsOf(engines)
	defer func() { stopGroup(procs) }()
	systems := lateSystems(engines)
	tiers := make([]tierSpec, len(systems))
	for i, s := range systems {
		tiers[i] = s.Tier
	}
	rt, err := sup.startRouter(env.router, "late-router", env.dir("late-tiers"), tiers)
	if err != nil {
		return nil, err
	}
	procs = append(procs, rt.proc)

	res := &lateResult{
		Rounds: o.lateRounds, BurstSeconds: o.lateBurst.Seconds(), BurstRate: o.lateBurstRate,
		LullSeconds: o.lateLull.Seconds(), LullRate: o.lateLullRate, Systems: systems,
		Engines: fmt.Sprintf("%d enginesim, --max-num-seqs %d, --output-tokens %d, default latencies (ttft 50ms+5ms/seq, itl 10ms+1ms/seq); engine %d --hidden-load %d",
			lateEngines, lateMaxNumSeqs, lateOutputTokens, lateBusy, lateHiddenLoad),
		Queue: fmt.Sprintf("queue {maxRequests: %d, maxWait: %s}", lateQueueMax, lateQueueWait),
	}
	for r := range o.lateRounds {
		for _, s := range systems {
			// The same seeds within a round give every configuration the
			// same arrival schedule.
			run, err := measureLate(env, rt, engines, s, uint64(100*r+1))
			if err != nil {
				return nil, err
			}
			s.Runs = append(s.Runs, run)
		}
	}
	if err := requireIdleRouter(env, rt); err != nil {
		return nil, err
	}
	res.Summary, err = summarizeLate(systems)
	return res, err
}

// measureLate runs one burst and lull through one configuration.
func measureLate(env *runEnv, rt *routerProc, engines []*engine, s *lateSystem, seed uint64) (lateRun, error) {
	sup, o := env.sup, env.opts
	if s.Tier.Strategy == "Capacity" {
		if err := primeCapacity(env, rt, s.Tier.key()); err != nil {
			return lateRun{}, err
		}
	}
	if err := sup.waitEnginesIdle(engines); err != nil {
		return lateRun{}, err
	}
	for _, e := range engines {
		if err := e.reset(sup.ctx); err != nil {
			return lateRun{}, err
		}
	}
	env.progress("late binding: %s, %.0f req/s for %v then %.0f req/s for %v", s.Name, o.lateBurstRate, o.lateBurst, o.lateLullRate, o.lateLull)
	client, pr := newProbeClient(lateMaxInFlight)
	cfg := func(rate float64, d time.Duration, seed uint64) loadgen.Config {
		return loadgen.Config{
			BaseURL: rt.url(), Model: s.Tier.Alias, Mode: loadgen.OpenLoop, Rate: rate,
			Concurrency: lateMaxInFlight, Seed: seed, Duration: d, RequestTimeout: lateRequestTimeout, Client: client,
		}
	}
	phases, err := runPhases(sup.ctx, []loadPhase{
		{Config: cfg(o.lateBurstRate, o.lateBurst, seed)},
		{After: o.lateBurst, Config: cfg(o.lateLullRate, o.lateLull, seed+1)},
	})
	if err != nil {
		return lateRun{}, err
	}
	if err := sup.err(); err != nil {
		return lateRun{}, err
	}
	c := combine(phases...)
	_, refusals := pr.snapshot()
	if err := checkRefusalsOnly(s.Name, c, refusals); err != nil {
		return lateRun{}, err
	}
	run := lateRun{
		Sent: c.Sent, Succeeded: c.Succeeded, Refusals: refusals,
		TTFT: c.TTFT.Summary(), E2E: c.E2E.Summary(),
	}
	total := 0
	for _, e := range engines {
		st, err := e.stats(sup.ctx)
		if err != nil {
			return lateRun{}, err
		}
		served := int(st.TotalRequests) //nolint:gosec // a run's requests fit an int.
		run.EngineRequests = append(run.EngineRequests, served)
		run.EngineMaxInFlight = append(run.EngineMaxInFlight, st.MaxInFlight)
		total += served
	}
	// A refusal never reaches an engine; every request that did was served.
	if total != c.Succeeded {
		return lateRun{}, fmt.Errorf("late binding: %s: engines served %d requests, %d succeeded", s.Name, total, c.Succeeded)
	}
	if total > 0 {
		run.BusyShare = float64(run.EngineRequests[lateBusy]) / float64(total)
	}
	return run, nil
}

// loadPhase is one open-loop load run that starts After the first one.
type loadPhase struct {
	// After is the phase's start, from the start of the first phase.
	After time.Duration
	// Config is its load.
	Config loadgen.Config
}

// runPhases runs the phases concurrently, each started at its After, and
// returns their results in order once every one ended.
func runPhases(ctx context.Context, phases []loadPhase) ([]*loadgen.Result, error) {
	out := make([]*loadgen.Result, len(phases))
	errs := make([]error, len(phases))
	var wg sync.WaitGroup
	for i, ph := range phases {
		wg.Go(func() {
			if ph.After > 0 {
				t := time.NewTimer(ph.After)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				}
			}
			out[i], errs[i] = loadgen.Run(ctx, ph.Config)
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// combined is several load runs' results taken together.
type combined struct {
	// Sent, Succeeded and Dropped are the sums.
	Sent, Succeeded, Dropped int
	// Statuses and Errors sum the runs' counts.
	Statuses map[int]int
	// Errors counts the failed requests by kind.
	Errors map[loadgen.ErrorKind]int
	// TTFT and E2E hold every run's samples.
	TTFT, E2E loadgen.Distribution
}

// combine takes the results together. Every sample a run kept is added
// again; a run keeps all of them up to loadgen.MaxSamples.
func combine(rs ...*loadgen.Result) *combined {
	c := &combined{Statuses: map[int]int{}, Errors: map[loadgen.ErrorKind]int{}}
	for _, r := range rs {
		c.Sent += r.Sent
		c.Succeeded += r.Succeeded
		c.Dropped += r.Dropped
		for k, v := range r.Statuses {
			c.Statuses[k] += v
		}
		for k, v := range r.Errors {
			c.Errors[k] += v
		}
		for _, v := range r.TTFT.Samples() {
			c.TTFT.Add(v)
		}
		for _, v := range r.E2E.Samples() {
			c.E2E.Add(v)
		}
	}
	return c
}

// checkRefusalsOnly fails a load run with any request that neither
// succeeded nor was refused by the router with 429 or 503 (the queue's and
// the tier's refusals), with any dropped arrival, or with counts that do
// not add up: latencies would then describe only part of the load.
func checkRefusalsOnly(name string, c *combined, refusals map[string]int) error {
	refused := c.Statuses[http.StatusTooManyRequests] + c.Statuses[http.StatusServiceUnavailable]
	switch {
	case c.Sent == 0:
		return fmt.Errorf("%s: no request was sent", name)
	case c.Dropped > 0:
		return fmt.Errorf("%s: %d arrivals dropped at the in-flight bound", name, c.Dropped)
	case c.Succeeded+refused != c.Sent || c.Errors[loadgen.ErrorStatus] != refused:
		return fmt.Errorf("%s: %d of %d requests failed other than by a 429 or 503 refusal (errors %v, statuses %v)",
			name, c.Sent-c.Succeeded-refused, c.Sent, c.Errors, c.Statuses)
	case countOf(refusals) != refused:
		return fmt.Errorf("%s: %d refusals read by the client, %d counted by status", name, countOf(refusals), refused)
	case c.E2E.Count() != c.Succeeded || c.TTFT.Count() != c.Succeeded:
		return fmt.Errorf("%s: %d/%d latency samples for %d requests", name, c.E2E.Count(), c.TTFT.Count(), c.Succeeded)
	}
	return nil
}

// summarizeLate computes the late binding scenario's medians and
// same-round ratios. The systems are (a), (b) and (c), in that order.
func summarizeLate(systems []*lateSystem) (lateSummary, error) {
	var sum lateSummary
	if len(systems) != 3 {
		return sum, fmt.Errorf("late binding: %w", errNoSamples)
	}
	for _, s := range systems {
		m, err := medianRuns(s.Runs, func(r lateRun) openLoopRun {
			return openLoopRun{Sent: r.Sent, TTFT: r.TTFT, E2E: r.E2E, BusyShare: r.BusyShare}
		})
		if err != nil {
			return sum, fmt.Errorf("%s: %w", s.Name, err)
		}
		row := lateRow{Name: s.Name, openLoopMedians: m, Refusals: map[string]int{}}
		for _, r := range s.Runs {
			for k, v := range r.Refusals {
				row.Refusals[k] += v
			}
			for _, m := range r.EngineMaxInFlight {
				row.MaxEngineInFlight = max(row.MaxEngineInFlight, m)
			}
		}
		sum.Rows = append(sum.Rows, row)
	}
	p99 := func(s *lateSystem) []float64 {
		out := make([]float64, len(s.Runs))
		for i, r := range s.Runs {
			out[i] = loadgen.Milliseconds(r.E2E.P99)
		}
		return out
	}
	vsEngine, err := pairedRatios(p99(systems[0]), p99(systems[1]))
	if err != nil {
		return sum, err
	}
	vsRR, err := pairedRatios(p99(systems[0]), p99(systems[2]))
	if err != nil {
		return sum, err
	}
	if sum.QueueVsEngineQueueP99, err = median(vsEngine); err != nil {
		return sum, err
	}
	if sum.QueueVsRoundRobinP99, err = median(vsRR); err != nil {
		return sum, err
	}
	sum.QueueRefused = countOf(sum.Rows[0].Refusals)
	return sum, nil
}
