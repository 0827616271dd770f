package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// Defaults of the run (docs/RELIABILITY.md#running-it explains them).
const (
	defaultDuration = 3 * time.Minute
	// referenceDuration is the run length the acceptance thresholds are
	// stated for; shorter and longer runs scale them.
	referenceDuration = 3 * time.Minute
	// referenceRequests and referenceFaults are the acceptance thresholds
	// of a referenceDuration run: requests in total, and injections of
	// each fault class.
	referenceRequests = 20000
	referenceFaults   = 20
	defaultEngines    = 4
	// defaultWorkers is above the members' summed base ceilings (16), so
	// that members run at their ceilings and some requests are refused.
	defaultWorkers = 24
	// Engine latencies: a request of 4..16 tokens takes 5..17 ms.
	defaultTTFT       = 2 * time.Millisecond
	defaultITL        = time.Millisecond
	defaultMaxNumSeqs = 16
	// defaultChaosPause is the pause between two cluster-level faults.
	defaultChaosPause = 200 * time.Millisecond
	// defaultDowntime is how long a killed engine stays dead before its
	// restart: long enough for requests to meet the dead port.
	defaultDowntime = 300 * time.Millisecond
	// warmDuration is how long the fault-free load runs before the
	// baseline and again before the final sample.
	warmDuration = 2 * time.Second
	// settleTimeout bounds the wait for leases, goroutines and fds to come
	// back after the run.
	settleTimeout = 30 * time.Second
	// monitorInterval is how often the capacity view is checked while the
	// soak runs.
	monitorInterval = 200 * time.Millisecond
	// maxKeptAccountingErrors bounds the accounting errors kept.
	maxKeptAccountingErrors = 20
	// Default fault mix: the probability of each per-request fault.
	defaultDisconnect   = 0.03
	defaultReset        = 0.03
	defaultTruncate     = 0.03
	defaultStallIdle    = 0.01
	defaultStallHeaders = 0.01
	defaultHostile      = 0.01
	exitFailure         = 1
	exitUsage           = 2
)

// options is the parsed command line.
type options struct {
	binDir, workDir, reportPath string
	duration                    time.Duration
	seed                        uint64
	engines, workers            int
	minRequests, minFaults      int
	killExcessMax               int
	strictOvershoot             bool
	slack                       resourceSlack
	chaosPause, downtime        time.Duration
	mix                         faultMix
}

// errUsage reports invalid flags.
var errUsage = errors.New("soak: invalid flags")

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.binDir, "bin", "out/soak/bin", "directory holding the router and enginesim binaries")
	fs.StringVar(&o.workDir, "work", "out/soak", "directory for manifests, process logs and engine request logs")
	fs.StringVar(&o.reportPath, "report", "out/soak/report.json", "path of the JSON report")
	fs.DurationVar(&o.duration, "duration", defaultDuration, "how long faults and load run")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the workload and the fault choices")
	fs.IntVar(&o.engines, "engines", defaultEngines, "number of engines (members), at least 3")
	fs.IntVar(&o.workers, "workers", defaultWorkers, "number of concurrent clients")
	fs.IntVar(&o.minRequests, "min-requests", -1, "fewest requests for a pass; -1 scales 20000 per 3 minutes")
	fs.IntVar(&o.minFaults, "min-faults", -1, "fewest injections of each fault class; -1 scales 20 per 3 minutes")
	fs.IntVar(&o.killExcessMax, "kill-excess-max", -1, "most failures beyond those in flight at the kills; -1 reports only")
	fs.BoolVar(&o.strictOvershoot, "strict-overshoot", false,
		"count arrivals above the ceiling that abandoned exchanges explain as violations too")
	fs.IntVar(&o.slack.Goroutines, "goroutine-slack", 5, "allowed goroutine difference from the baseline")
	fs.IntVar(&o.slack.FDs, "fd-slack", 5, "allowed open-fd difference from the baseline")
	fs.Int64Var(&o.slack.RSSKiB, "rss-slack-kib", 64<<10, "allowed RSS growth over the baseline, KiB")
	fs.DurationVar(&o.chaosPause, "chaos-pause", defaultChaosPause, "pause between cluster-level faults")
	fs.DurationVar(&o.downtime, "kill-downtime", defaultDowntime, "how long a killed engine stays down")
	fs.Float64Var(&o.mix.disconnect, "p-disconnect", defaultDisconnect, "probability of a client disconnect mid-stream")
	fs.Float64Var(&o.mix.reset, "p-reset", defaultReset, "probability of an engine reset mid-body")
	fs.Float64Var(&o.mix.truncate, "p-truncate", defaultTruncate, "probability of a truncated stream")
	fs.Float64Var(&o.mix.stallIdle, "p-stall", defaultStallIdle, "probability of a body stall (idle timeout)")
	fs.Float64Var(&o.mix.stallHeaders, "p-stall-headers", defaultStallHeaders, "probability of a header stall (header timeout)")
	fs.Float64Var(&o.mix.hostile, "p-hostile", defaultHostile, "probability of a hostile member (endless header line or 100 Continue flood)")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	p := []float64{o.mix.disconnect, o.mix.reset, o.mix.truncate, o.mix.stallIdle, o.mix.stallHeaders, o.mix.hostile}
	sum := 0.0
	for _, x := range p {
		if x < 0 || x > 1 {
			return o, fmt.Errorf("%w: probabilities must be 0..1", errUsage)
		}
		sum += x
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("%w: unexpected arguments %v", errUsage, fs.Args())
	case sum > 1:
		return o, fmt.Errorf("%w: the fault probabilities add up to more than 1", errUsage)
	case o.duration <= 0 || o.duration > time.Hour:
		return o, fmt.Errorf("%w: --duration must be in (0, 1h]", errUsage)
	case o.engines < minMembers+1 || o.engines > 16:
		return o, fmt.Errorf("%w: --engines must be %d..16", errUsage, minMembers+1)
	case o.workers < 1 || o.workers > 256:
		return o, fmt.Errorf("%w: --workers must be 1..256", errUsage)
	case o.chaosPause < 0 || o.downtime < 0 || o.downtime > time.Minute:
		return o, fmt.Errorf("%w: --chaos-pause and --kill-downtime must be non-negative (downtime at most 1m)", errUsage)
	case o.slack.Goroutines < 0 || o.slack.FDs < 0 || o.slack.RSSKiB < 0:
		return o, fmt.Errorf("%w: slacks must be non-negative", errUsage)
	}
	scale := float64(o.duration) / float64(referenceDuration)
	if o.minRequests < 0 {
		o.minRequests = int(referenceRequests * scale)
	}
	if o.minFaults < 0 {
		o.minFaults = max(1, int(referenceFaults*scale))
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the soak and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := soak(ctx, o, stderr)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "soak:", err)
		return exitFailure
	}
	if err := rep.write(o.reportPath); err != nil {
		_, _ = fmt.Fprintln(stderr, "soak: writing the report:", err)
		return exitFailure
	}
	_, _ = fmt.Fprintln(stdout, rep.summary())
	if failed := rep.failed(); len(failed) > 0 {
		for _, inv := range rep.Invariants {
			if !inv.OK {
				_, _ = fmt.Fprintf(stderr, "soak: invariant %s failed: %s\n", inv.Name, inv.Detail)
			}
		}
		return exitFailure
	}
	return 0
}

// memberID names member i.
func memberID(i int) string { return fmt.Sprintf("gpu%d", i) }

// soak runs one soak and returns its report; an error means the soak could
// not run (a process did not start, a manifest was not applied), not that an
// invariant failed.
func soak(ctx context.Context, o options, progress io.Writer) (*report, error) {
	s, err := newStack(o.binDir, o.workDir, engineSettings{ttftBase: defaultTTFT, itlBase: defaultITL, maxNumSeqs: defaultMaxNumSeqs})
	if err != nil {
		return nil, err
	}
	defer s.stop()
	all := make([]string, o.engines)
	for i := range all {
		all[i] = memberID(i)
		if err := s.startEngine(ctx, all[i], "127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	// The warm-up and final configuration: every member at the highest
	// ceiling, Capacity (so that the pressure cache's connections exist in
	// both samples).
	full := tierConfig{Strategy: string(sluicev1.StrategyCapacity)}
	for _, id := range all {
		full.Members = append(full.Members, memberConfig{ID: id, Ceiling: maxCeiling})
	}
	if err := writeManifest(s.tiersDir, full, s.addrs); err != nil {
		return nil, err
	}
	if err := s.startRouter(ctx); err != nil {
		return nil, err
	}
	if err := s.apply(ctx, full); err != nil {
		return nil, err
	}
	if err := s.awaitReady(ctx, full); err != nil {
		return nil, err
	}

	records := make(chan requestRecord, 1024)
	var (
		all2      []requestRecord
		collected = make(chan struct{})
	)
	go func() {
		defer close(collected)
		for r := range records {
			all2 = append(all2, r)
		}
	}()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: o.workers, DisableCompression: true}}
	d := &driver{client: client, baseURL: s.front, mix: faultMix{}, seed: o.seed, out: records}

	// Warm-up without faults, then the baseline.
	load(ctx, d, o.workers, warmDuration)
	client.CloseIdleConnections()
	if _, err := s.awaitNoLeases(ctx, settleTimeout); err != nil {
		return nil, err
	}
	base, err := s.quietSample(ctx)
	if err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(progress, "soak: baseline %+v; running %v of faults and load\n", base, o.duration)

	// The soak proper: the base configuration, faults and load.
	start := time.Now()
	cfg := full.clone()
	for i := range cfg.Members {
		cfg.Members[i].Ceiling = baseCeiling
	}
	if err := s.apply(ctx, cfg); err != nil {
		return nil, err
	}
	runCtx, cancelRun := context.WithTimeout(ctx, o.duration)
	defer cancelRun()
	c := &chaos{
		s: s, cfg: cfg, all: all, rng: rand.New(rand.NewPCG(o.seed, 0)), //nolint:gosec // reproducible choices.
		pause: o.chaosPause, downtime: o.downtime, faults: map[string]int{}, drains: map[string]int{},
	}
	mon := &monitor{s: s}
	var wg sync.WaitGroup
	wg.Go(func() { mon.run(runCtx) })
	chaosErr := make(chan error, 1)
	wg.Go(func() { chaosErr <- c.run(runCtx) })
	d.mix = o.mix
	load(runCtx, d, o.workers, o.duration)
	cancelRun()
	wg.Wait()
	if err := <-chaosErr; err != nil {
		return nil, err
	}
	elapsed := time.Since(start)

	// Back to the warm-up configuration and load, then the final checks.
	if err := s.apply(ctx, full); err != nil {
		return nil, err
	}
	if err := s.awaitReady(ctx, full); err != nil {
		return nil, err
	}
	d.mix = faultMix{}
	load(ctx, d, o.workers, warmDuration)
	client.CloseIdleConnections()
	leaked, err := s.awaitNoLeases(ctx, settleTimeout)
	if err != nil {
		return nil, err
	}
	var final resources
	settleErr := supervise.Poll(ctx, settleTimeout, "resources back to baseline", func() (bool, string, error) {
		r, err := s.sample(ctx)
		if err != nil {
			return false, "", err
		}
		final = r
		diff := checkResources(base, r, o.slack)
		return len(diff) == 0, strings.Join(diff, ", "), nil
	})
	if settleErr != nil && !errors.Is(settleErr, supervise.ErrTimeout) {
		return nil, settleErr
	}
	serving := send(ctx, client, s.front, requestSpec{id: fmt.Sprintf("soak-%d-final", o.seed), chat: true, tokens: minTokens})
	client.CloseIdleConnections()
	close(records)
	<-collected

	if err := writeRecords(filepath.Join(o.workDir, "requests.jsonl"), all2); err != nil {
		return nil, err
	}
	logs, err := s.engineLogs()
	if err != nil {
		return nil, err
	}
	// The router writes its last decision records when it stops.
	routerExit := s.router.UnexpectedExit()
	s.router.Stop()
	dec, err := s.decisions()
	if err != nil {
		return nil, err
	}
	panics, err := routerPanics(s.routerLog())
	if err != nil {
		return nil, err
	}
	logged := map[string]bool{}
	for _, recs := range logs {
		for _, r := range recs {
			logged[r.ID] = true
		}
	}
	rep := &report{
		Seed: o.seed, DurationSeconds: elapsed.Seconds(), Engines: o.engines, Workers: o.workers,
		Requests:       len(all2),
		Outcomes:       checkOutcomes(all2, c.kills, logged, dec.ends),
		StreamOutcomes: checkStreamOutcomes(all2, dec.ends, c.kills, logged),
		Faults:         faultCounts(c.faults, all2, logged),
		Overshoot:      checkOvershoot(logs, s.hist, admitSlack, abandonedEnds(all2), o.strictOvershoot),
		Duplicates:     checkDuplicates(logs),
		LeakedLeases:   leaked,
		AccountingErrs: mon.errors,
		Kills:          analyzeKills(all2, c.kills, dec.ejected),
		Drains:         c.drains,
		Baseline:       base, Final: final, Slack: o.slack,
		ConfigEpochs: len(s.hist),
		RouterPanics: panics,
		Thresholds: map[string]int{
			"min_requests": o.minRequests, "min_faults_per_class": o.minFaults, "kill_excess_max": o.killExcessMax,
		},
	}
	rep.FaultClasses = classify(rep.Faults)
	for _, k := range rep.Kills {
		rep.KillExcess += k.Excess
	}
	rep.Invariants = evaluate(rep, o, serving, routerExit)
	return rep, nil
}

// evaluate decides every invariant of a finished run.
func evaluate(rep *report, o options, serving requestRecord, routerExit error) []invariant {
	check := func(name string, ok bool, format string, args ...any) invariant {
		inv := invariant{Name: name, OK: ok}
		if !ok {
			inv.Detail = fmt.Sprintf(format, args...)
		}
		return inv
	}
	var lowFaults []string
	for _, c := range faultClasses {
		if rep.FaultClasses[c] < o.minFaults {
			lowFaults = append(lowFaults, fmt.Sprintf("%s=%d", c, rep.FaultClasses[c]))
		}
	}
	drainsOK := true
	for k, n := range rep.Drains {
		if k != "ok" && n > 0 {
			drainsOK = false
		}
	}
	out := []invariant{
		check(invLeases, len(rep.LeakedLeases) == 0, "%v", rep.LeakedLeases),
		check(invAccounting, len(rep.AccountingErrs) == 0, "%v", rep.AccountingErrs),
		check(invOvershoot, rep.Overshoot.Violations == 0, "%d arrivals above the ceiling: %v",
			rep.Overshoot.Violations, rep.Overshoot.Examples),
		check(invOutcomes, rep.Outcomes.Bad == 0, "%d bad answers: %v", rep.Outcomes.Bad, rep.Outcomes.Examples),
		check(invStreamEnds, rep.StreamOutcomes.Bad == 0, "%d records contradict their requests: %v",
			rep.StreamOutcomes.Bad, rep.StreamOutcomes.Examples),
		check(invDuplicates, rep.Duplicates.Duplicates == 0 && rep.Duplicates.Unidentified == 0,
			"%d duplicated ids, %d without id: %v", rep.Duplicates.Duplicates, rep.Duplicates.Unidentified, rep.Duplicates.Examples),
		check(invResources, len(checkResources(rep.Baseline, rep.Final, o.slack)) == 0, "%v",
			checkResources(rep.Baseline, rep.Final, o.slack)),
		check(invServing, routerExit == nil && serving.Outcome == outcomeOK, "router exit %v, final request %s %s",
			routerExit, serving.Outcome, serving.Detail),
		check(invPanics, len(rep.RouterPanics) == 0, "%d panics, the first: %s", len(rep.RouterPanics), firstOf(rep.RouterPanics)),
		check(invDrains, drainsOK, "%v", rep.Drains),
		check(invRequests, rep.Requests >= o.minRequests, "%d requests, want at least %d", rep.Requests, o.minRequests),
		check(invFaults, len(lowFaults) == 0, "want at least %d of each class: %v", o.minFaults, lowFaults),
	}
	if o.killExcessMax >= 0 {
		out = append(out, check(invKillExcess, rep.KillExcess <= o.killExcessMax,
			"%d failures beyond those in flight at the kills, want at most %d", rep.KillExcess, o.killExcessMax))
	}
	return out
}

// load runs workers until d passes or ctx ends.
func load(ctx context.Context, d *driver, workers int, dur time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { d.worker(ctx, i) })
	}
	wg.Wait()
}

// monitor checks the capacity view's accounting while the soak runs.
type monitor struct {
	s      *stack
	errors []string
	polls  int
}

// run polls until ctx ends.
func (m *monitor) run(ctx context.Context) {
	ticker := time.NewTicker(monitorInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		v, err := m.s.capacity(ctx)
		if err != nil {
			continue // a poll cut by the end of the run
		}
		m.polls++
		for _, e := range checkAccounting(v) {
			if len(m.errors) < maxKeptAccountingErrors {
				m.errors = append(m.errors, e)
			}
		}
	}
}
