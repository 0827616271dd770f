//go:build linux

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/loadgen"
	"github.com/sluice-dev/sluice/internal/procstat"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// Scenario 3 (concurrent SSE streams) constants.
const (
	// streamsCount is the number of concurrent streams
	// (docs/BENCHMARKS.md#targets).
	streamsCount = 1000
	// streamsEngines is the number of engines behind the router.
	streamsEngines = 3
	// streamsCeiling is every member's ceiling: three of them hold the
	// 1000 streams with room to spare, so none is refused.
	streamsCeiling = 400
	// streamsMaxNumSeqs gives every stream a slot at once.
	streamsMaxNumSeqs = 512
	// streamsTokens and streamsITL make a stream last about 6 s, long
	// enough for all 1000 to be open at once on a loaded 2-core machine,
	// at 10 000 tokens per second across the router.
	streamsTokens = 60
	// streamsITL is the fixed inter-token latency (no per-sequence growth).
	streamsITL = 100 * time.Millisecond
	// streamsCutAfter is the client timeout of the second phase: every
	// stream is abandoned mid-way, about half through.
	streamsCutAfter = 3 * time.Second
	// streamsSampleEvery is how often the router's memory and leases are
	// sampled during a phase.
	streamsSampleEvery = 100 * time.Millisecond
	// leaseSettle bounds the wait for the router's leases to reach zero
	// after the last stream ended; a lease is released when the exchange
	// ends, so anything still held after this long is leaked.
	leaseSettle = 5 * time.Second
)

// streamsSpec is one run of scenario 3: how many streams, and the engines
// and ceilings that give every stream a slot at once.
type streamsSpec struct {
	// count is the number of concurrent streams per phase.
	count int
	// ceiling is every member's maxConcurrency; maxNumSeqs every engine's
	// slots.
	ceiling, maxNumSeqs int
	// tokens is each stream's length in tokens, streamsITL apart: long
	// enough for every stream to be open at once.
	tokens int
	// abandon adds the phase whose streams the client cuts mid-way.
	abandon bool
	// measured: the run has no target, so streams the router refused or
	// failed are counted and published (with the router's reasons) rather
	// than failing the run. Leaked leases still fail its verdict.
	measured bool
}

// The runs of scenario 3: the 1000 streams of docs/BENCHMARKS.md#targets
// in both phases, and 5000 streams read to the end, measured and
// published without a target.
var (
	streams1000 = streamsSpec{count: streamsCount, ceiling: streamsCeiling, maxNumSeqs: streamsMaxNumSeqs, tokens: streamsTokens, abandon: true}
	// 5000 connections take many seconds to open on two cores (more than
	// 15 s on a busy machine), so these streams last about 30 s.
	streams5000 = streamsSpec{count: 5000, ceiling: 2000, maxNumSeqs: 2048, tokens: 300, measured: true}
)

// streamsPhase is one phase of scenario 3.
type streamsPhase struct {
	// Name says how the streams ended.
	Name string `json:"name"`
	// Sent and Succeeded count streams; TimedOut counts streams the client
	// abandoned on purpose.
	Sent int `json:"sent"`
	// Succeeded counts streams read to [DONE].
	Succeeded int `json:"succeeded"`
	// TimedOut counts streams the client abandoned mid-way.
	TimedOut int `json:"timed_out"`
	// Failed counts the streams that neither completed nor were cut by the
	// client, in a run without a target; Refusals and Outcomes are the
	// router's decision-log counts for the phase's router.
	Failed int `json:"failed,omitempty"`
	// Refusals counts the router's refusals by reason.
	Refusals map[string]int `json:"refusals,omitempty"`
	// Outcomes counts the router's admitted exchanges by how they ended.
	Outcomes map[string]int `json:"stream_outcomes,omitempty"`
	// ClientErrors and Statuses are the load generator's failure classes
	// and HTTP statuses of the failed streams' phase.
	ClientErrors map[string]int `json:"client_errors,omitempty"`
	// Statuses counts the answers' HTTP statuses.
	Statuses map[int]int `json:"statuses,omitempty"`
	// PeakActive is the most router leases seen at once.
	PeakActive int `json:"peak_active"`
	// PeakRSSKiB is the largest VmRSS sampled during the phase.
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	// PeakAnonKiB is the largest RssAnon sampled: the router's own
	// memory, without the file pages it maps.
	PeakAnonKiB int64 `json:"peak_rss_anon_kib"`
	// LeasesAfter is the router's active leases once the streams ended
	// and leaseSettle passed (or earlier, once zero).
	LeasesAfter int `json:"leases_after"`
	// EngineInFlightAfter sums the engines' in-flight requests afterwards.
	EngineInFlightAfter int `json:"engine_in_flight_after"`
	// After is the router's memory once the leases settled.
	After procstat.Memory `json:"after"`
	// GoroutinesPeak and GoroutinesAfter are the router's go_goroutines
	// during and after the streams, when it exposes them.
	GoroutinesPeak *float64 `json:"goroutines_peak,omitempty"`
	// GoroutinesAfter is go_goroutines once the leases settled.
	GoroutinesAfter *float64 `json:"goroutines_after,omitempty"`
	// Heap is the router's memory when the phase's streams were all open,
	// recorded in the first phase only.
	Heap *heapSnapshot `json:"heap,omitempty"`
	// TTFTP50MS and E2EP50MS describe the streams that completed.
	TTFTP50MS float64 `json:"ttft_p50_ms"`
	// TTFTP99MS is the 99th percentile time to first token.
	TTFTP99MS float64 `json:"ttft_p99_ms"`
	// Timeline samples the router's RSS (MiB) and leases over the phase.
	Timeline []streamsSample `json:"timeline"`
}

// streamsSample is one sample of the router during a phase.
type streamsSample struct {
	// T is the time since the phase started, in seconds.
	T float64 `json:"t"`
	// RSSMiB is VmRSS.
	RSSMiB float64 `json:"rss_mib"`
	// Active is the router's active leases.
	Active int `json:"active"`
}

// streamsResult is scenario 3's measurements.
type streamsResult struct {
	// Router names the baseline router (-baseline) the streams went
	// through; empty for the work tree's.
	Router string `json:"router,omitempty"`
	// Streams is the number of concurrent streams per phase.
	Streams int `json:"streams"`
	// Idle is the router's memory before the first stream.
	Idle procstat.Memory `json:"idle"`
	// GoroutinesIdle is go_goroutines before the first stream, when
	// exposed.
	GoroutinesIdle *float64 `json:"goroutines_idle,omitempty"`
	// GoroutinesExposed says whether the router's /metrics has
	// go_goroutines.
	GoroutinesExposed bool `json:"goroutines_exposed"`
	// Phases are the completed and the abandoned streams.
	Phases []streamsPhase `json:"phases"`
	// HWMKiB is the router's VmHWM (peak RSS since start) at the end.
	HWMKiB int64 `json:"hwm_kib"`
	// Final is the router's memory at the end.
	Final procstat.Memory `json:"final"`
}

// runStreamsScenario runs scenario 3: 1000 streams, then 5000, each
// through the work tree's router and then, with -baseline, through the
// baseline's.
func runStreamsScenario(env *runEnv, res *results) error {
	for _, run := range []struct {
		spec           streamsSpec
		head, baseline **streamsResult
	}{
		{streams1000, &res.Streams, &res.StreamsBaseline},
		{streams5000, &res.Streams5000, &res.Streams5000Baseline},
	} {
		var err error
		if *run.head, err = runStreams(env, run.spec, env.router, ""); err != nil {
			return err
		}
		if b := env.baseline; b != nil {
			if *run.baseline, err = runStreams(env, run.spec, b.bin, b.label()); err != nil {
				return fmt.Errorf("%s: %w", b.label(), err)
			}
		}
	}
	return nil
}

// runStreams runs scenario 3 as spec says through the router binary bin;
// label names a baseline router, "" the work tree's.
func runStreams(env *runEnv, spec streamsSpec, bin, label string) (*streamsResult, error) {
	sup := env.sup
	name, heapPrefix := fmt.Sprintf("streams%d", spec.count), "router"
	if label != "" {
		name, heapPrefix = name+"-baseline", "router-baseline"
		env.progress("streams: %d streams through the baseline router, %s", spec.count, label)
	}
	eo := engineOptions{MaxNumSeqs: spec.maxNumSeqs, OutputTokens: spec.tokens, TTFTBase: 10 * time.Millisecond, ITLBase: streamsITL}
	engines, err := sup.startEngines(env.enginesim, name, streamsEngines, eo, nil)
	if err != nil {
		return nil, err
	}
	procs := procsOf(engines)
	defer func() { stopGroup(procs) }()
	tier := tierSpec{Name: "cp", Alias: aliasCapacity, Strategy: "Capacity", Ceiling: spec.ceiling, Engines: engines}
	rt, err := sup.startRouter(bin, name+"-router", env.dir(name+"-tiers"), []tierSpec{tier})
	if err != nil {
		return nil, err
	}
	procs = append(procs, rt.proc)
	res := &streamsResult{Router: label, Streams: spec.count}
	if res.Idle, err = procstat.Read(rt.proc.Pid()); err != nil {
		return nil, err
	}
	if g, ok, err := rt.goroutines(sup.ctx); err != nil {
		return nil, err
	} else if ok {
		res.GoroutinesExposed, res.GoroutinesIdle = true, &g
	}
	phases := []struct {
		name string
		cut  time.Duration
	}{{"complete", 0}, {"abandoned by the client mid-stream", streamsCutAfter}}
	if !spec.abandon {
		phases = phases[:1]
	}
	for i, ph := range phases {
		heapFile := ""
		if i == 0 {
			heapFile = fmt.Sprintf("%s-heap-streams%d.pprof", heapPrefix, spec.count)
		}
		p, err := runStreamsPhase(env, rt, engines, tier, spec, ph.name, ph.cut, res.GoroutinesExposed, heapFile)
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, p)
	}
	if res.Final, err = procstat.Read(rt.proc.Pid()); err != nil {
		return nil, err
	}
	res.HWMKiB = res.Final.HWMKiB
	return res, nil
}

// runStreamsPhase opens count streams at once through the router, samples
// the router while they run, and checks what is left after. With a
// heapFile, the router's heap profile is recorded into it once the streams
// are open.
func runStreamsPhase(env *runEnv, rt *routerProc, engines []*engine, tier tierSpec, spec streamsSpec, name string, cut time.Duration, goroutines bool, heapFile string) (streamsPhase, error) {
	sup := env.sup
	count := spec.count
	ph := streamsPhase{Name: name}
	if err := primeCapacity(env, rt, tier.key()); err != nil {
		return ph, err
	}
	if err := sup.waitEnginesIdle(engines); err != nil {
		return ph, err
	}
	env.progress("streams: %d concurrent SSE streams, %s", count, name)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sampleErr error
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(streamsSampleEvery)
		defer t.Stop()
		for {
			at := time.Since(start).Seconds()
			st, err := procstat.Read(rt.proc.Pid())
			if err == nil {
				var c adminapi.CapacityView
				if c, err = rt.capacity(sup.ctx); err == nil {
					ph.PeakActive = max(ph.PeakActive, activeOf(c))
					ph.PeakRSSKiB = max(ph.PeakRSSKiB, st.RSSKiB)
					ph.PeakAnonKiB = max(ph.PeakAnonKiB, st.AnonKiB)
					ph.Timeline = append(ph.Timeline, streamsSample{T: at, RSSMiB: mib(st.RSSKiB), Active: activeOf(c)})
				}
			}
			if err == nil && heapFile != "" && ph.PeakActive >= count && ph.Heap == nil {
				ph.Heap, err = snapshotHeap(env, rt, heapFile)
			}
			if err == nil && goroutines && ph.PeakActive >= count && ph.GoroutinesPeak == nil {
				var g float64
				var ok bool
				if g, ok, err = rt.goroutines(sup.ctx); err == nil && ok {
					ph.GoroutinesPeak = &g
				}
			}
			if err != nil {
				sampleErr = err
				return
			}
			select {
			case <-stop:
				return
			case <-sup.ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	r, err := loadgen.Run(sup.ctx, loadgen.Config{
		BaseURL:        rt.url(),
		Model:          tier.Alias,
		Mode:           loadgen.ClosedLoop,
		Concurrency:    count,
		Requests:       count,
		RequestTimeout: cut,
	})
	close(stop)
	wg.Wait()
	if err != nil {
		return ph, err
	}
	if err := sup.err(); err != nil {
		return ph, err
	}
	if sampleErr != nil {
		return ph, fmt.Errorf("streams: sampling the router: %w", sampleErr)
	}
	ph.Sent, ph.Succeeded, ph.TimedOut = r.Sent, r.Succeeded, r.Errors[loadgen.ErrorTimeout]
	ph.TTFTP50MS = float64(r.TTFT.Quantile(0.5)) / float64(time.Millisecond)
	ph.TTFTP99MS = float64(r.TTFT.Quantile(0.99)) / float64(time.Millisecond)
	switch {
	case r.Sent != count:
		return ph, fmt.Errorf("streams (%s): sent %d of %d", name, r.Sent, count)
	case cut == 0 && r.Succeeded != count && spec.measured:
		// Published with the router's reasons, from its decision log.
		var sum evidence.Summary
		if err := getJSON(sup.ctx, "http://"+rt.admin+"/admin/v1/decisions/summary", &sum); err != nil {
			return ph, err
		}
		ph.Failed, ph.Refusals, ph.Outcomes = r.Sent-r.Succeeded, sum.RefusalReasons, sum.StreamOutcomes
		ph.ClientErrors, ph.Statuses = map[string]int{}, r.Statuses
		for k, v := range r.Errors {
			ph.ClientErrors[string(k)] = v
		}
	case cut == 0 && r.Succeeded != count:
		return ph, fmt.Errorf("streams (%s): %d of %d streams failed (errors %v, statuses %v)", name, r.Sent-r.Succeeded, r.Sent, r.Errors, r.Statuses)
	case cut > 0 && ph.TimedOut != count:
		return ph, fmt.Errorf("streams (%s): %d of %d streams were cut by the client (errors %v, statuses %v); the streams must outlive the cut", name, ph.TimedOut, r.Sent, r.Errors, r.Statuses)
	case ph.PeakActive < count-ph.Failed:
		return ph, fmt.Errorf("streams (%s): at most %d leases were held at once, not %d: the streams did not overlap", name, ph.PeakActive, count)
	}

	// Leases are released when each exchange ends; give the router
	// leaseSettle to see every end, then count what is left. The engines
	// see the router's upstream requests end the same way.
	ph.LeasesAfter, err = settleZero(sup, func() (int, error) {
		c, err := rt.capacity(sup.ctx)
		return activeOf(c), err
	})
	if err != nil {
		return ph, err
	}
	ph.EngineInFlightAfter, err = settleZero(sup, func() (int, error) {
		n := 0
		for _, e := range engines {
			st, err := e.stats(sup.ctx)
			if err != nil {
				return 0, err
			}
			n += st.InFlight
		}
		return n, nil
	})
	if err != nil {
		return ph, err
	}
	if ph.After, err = procstat.Read(rt.proc.Pid()); err != nil {
		return ph, err
	}
	if goroutines {
		g, ok, err := rt.goroutines(sup.ctx)
		if err != nil {
			return ph, err
		}
		if ok {
			ph.GoroutinesAfter = &g
		}
	}
	return ph, nil
}

// settleZero polls count until it reads zero or leaseSettle passed, and
// returns the last count.
func settleZero(sup *supervisor, count func() (int, error)) (int, error) {
	deadline := time.Now().Add(leaseSettle)
	t := time.NewTicker(supervise.PollInterval)
	defer t.Stop()
	for {
		n, err := count()
		if err != nil || n == 0 || time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-sup.ctx.Done():
			return n, sup.err()
		case <-t.C:
		}
	}
}
