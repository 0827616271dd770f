package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/loadgen"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// memberHeader is the router's response header naming the member that
// served a request.
const memberHeader = "X-Sluice-Member"

// stack is the running processes of the demo and their addresses.
type stack struct {
	engines map[string]string // member id -> host:port
	front   string            // router front door host:port
	admin   string            // router admin host:port
}

// run starts the processes, runs both phases, reports, and stops every
// process on return, whatever happened.
func run(ctx context.Context, o options, stdout io.Writer) (err error) {
	tiers, err := loadTiers(o.samplesDir)
	if err != nil {
		return err
	}
	if !slices.Contains(tiers.members, o.hiddenMember) {
		return fmt.Errorf("--hidden-member %q is not a member of the demo tiers %v", o.hiddenMember, tiers.members)
	}
	demoDir := filepath.Join(o.outDir, "demo")
	logDir, tiersDir := filepath.Join(demoDir, "logs"), filepath.Join(demoDir, "tiers")
	// The processes append to their logs: the logs of an earlier run go.
	if err := os.RemoveAll(logDir); err != nil {
		return err
	}
	for _, d := range []string{logDir, tiersDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}

	// Any process dying cancels everything with the reason; the end of ctx
	// (Ctrl-C) sends SIGTERM to every process group at once.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var procs []*supervise.Process
	defer func() {
		// The router first (it drains, then exits), then the engines.
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop()
		}
	}()
	start := func(name, bin string, args []string, ready func([]byte) bool) error {
		p, err := supervise.Start(ctx, supervise.Spec{Name: name, Path: filepath.Join(o.binDir, bin), Args: args,
			Log: filepath.Join(logDir, name+".log"), Ready: ready, Died: fail})
		if err == nil {
			procs = append(procs, p)
		}
		return err
	}
	defer func() {
		// A failure caused by a dying process is reported as that.
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
		}
	}()

	st := stack{engines: map[string]string{}}
	fmt.Fprintf(stdout, "Starting %d engines (enginesim, %d slots each; %s has %d hidden sequences) and the router...\n",
		len(tiers.members), o.maxNumSeqs, o.hiddenMember, o.hiddenLoad)
	for _, id := range tiers.members {
		hidden := 0
		if id == o.hiddenMember {
			hidden = o.hiddenLoad
		}
		var addr string
		if err := start("engine-"+id, "enginesim", engineFlags(&o, tiers.capacity.Spec.ServedModel, hidden), startlines.EngineAddr(&addr)); err != nil {
			return err
		}
		st.engines[id] = addr
	}
	if err := writeTiers(tiersDir, st.engines, tiers.roundRobin, tiers.capacity); err != nil {
		return err
	}
	if err := start("router", "router", []string{
		"--tiers-dir", tiersDir,
		"--node-name", tiers.capacity.Spec.NodeName,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--shutdown-timeout", routerShutdownTimeout.String(),
	}, startlines.RouterAddrs(&st.front, &st.admin)); err != nil {
		return err
	}
	if err := waitReady(ctx, st, tierKey(tiers.roundRobin), tierKey(tiers.capacity)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Router ready (logs in %s). Each phase: open loop, Poisson arrivals at %.4g/s for %v, %d output tokens, streaming chat.\n\n",
		logDir, o.rate, o.duration, o.maxTokens)

	var phases []phaseReport
	for _, t := range []*sluicev1.ReplicaTier{tiers.roundRobin, tiers.capacity} {
		pr, err := runPhase(ctx, &o, st, t, stdout)
		if err != nil {
			return err
		}
		phases = append(phases, pr)
		printPhase(stdout, &pr)
	}
	rep := newReport(&o, phases)
	printVerdict(stdout, &rep)
	jsonPath, chartPath := filepath.Join(o.outDir, "demo-report.json"), filepath.Join(o.outDir, "demo-chart.svg")
	if err := writeReport(jsonPath, &rep); err != nil {
		return err
	}
	if err := writeChart(chartPath, &rep); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote %s and %s.\n", jsonPath, chartPath)
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%d check(s) failed: %v", len(rep.Failures), rep.Failures)
	}
	return nil
}

// waitReady waits until every member of both tiers is ready.
func waitReady(ctx context.Context, st stack, tierKeys ...string) error {
	return supervise.Poll(ctx, readyTimeout, "every member ready", func() (bool, string, error) {
		var v adminapi.CapacityView
		if err := getJSON(ctx, "http://"+st.admin+"/admin/v1/capacity", &v); err != nil {
			return false, "", err
		}
		for _, key := range tierKeys {
			i := slices.IndexFunc(v.Tiers, func(t adminapi.TierCapacity) bool { return t.Tier == key })
			if i < 0 {
				return false, "tier " + key + " not served yet", nil
			}
			for _, m := range v.Tiers[i].Members {
				if !m.Ready {
					return false, "member " + m.ID + " of " + key + " not ready", nil
				}
			}
		}
		return true, "", nil
	})
}

// waitFresh waits until every member of the tier has fresh pressure.
func waitFresh(ctx context.Context, st stack, key string) error {
	return supervise.Poll(ctx, readyTimeout, "fresh pressure for "+key, func() (bool, string, error) {
		v, err := tierCapacity(ctx, st, key)
		if err != nil {
			return false, "", err
		}
		for _, m := range v.Members {
			if m.Pressure == nil || m.Pressure.Freshness != "fresh" {
				return false, "member " + m.ID + " pressure not fresh", nil
			}
		}
		return true, "", nil
	})
}

// tierCapacity returns one tier's entry of the router's capacity view.
func tierCapacity(ctx context.Context, st stack, key string) (adminapi.TierCapacity, error) {
	var v adminapi.CapacityView
	if err := getJSON(ctx, "http://"+st.admin+"/admin/v1/capacity", &v); err != nil {
		return adminapi.TierCapacity{}, err
	}
	i := slices.IndexFunc(v.Tiers, func(t adminapi.TierCapacity) bool { return t.Tier == key })
	if i < 0 {
		return adminapi.TierCapacity{}, fmt.Errorf("tier %s missing from the capacity view", key)
	}
	return v.Tiers[i], nil
}

// waitIdle waits until every engine has no request in flight or waiting and
// the tier holds no lease.
func waitIdle(ctx context.Context, st stack, key string) error {
	return supervise.Poll(ctx, idleTimeout, "engines and router idle", func() (bool, string, error) {
		for id, addr := range st.engines {
			var s enginesim.Stats
			if err := getJSON(ctx, "http://"+addr+"/debug/stats", &s); err != nil {
				return false, "", err
			}
			if s.InFlight != 0 || s.Waiting != 0 {
				return false, fmt.Sprintf("engine %s has %d in flight", id, s.InFlight), nil
			}
		}
		v, err := tierCapacity(ctx, st, key)
		if err != nil {
			return false, "", err
		}
		if v.Active != 0 {
			return false, fmt.Sprintf("tier %s holds %d leases", key, v.Active), nil
		}
		return true, "", nil
	})
}

// runPhase warms the tier up, resets the engines' statistics, runs the
// workload through the tier and collects what the engines saw.
func runPhase(ctx context.Context, o *options, st stack, t *sluicev1.ReplicaTier, stdout io.Writer) (phaseReport, error) {
	key, alias := tierKey(t), t.Spec.Aliases[0]
	base := loadgen.Config{
		BaseURL:        "http://" + st.front + "/v1",
		Model:          alias,
		MaxTokens:      o.maxTokens,
		CountHeader:    memberHeader,
		RequestTimeout: maxRequestTimeout,
	}
	warm := base
	warm.Concurrency, warm.Requests = 1, o.warmup
	res, err := loadgen.Run(ctx, warm)
	if err != nil {
		return phaseReport{}, err
	}
	if res.Succeeded != o.warmup {
		return phaseReport{}, fmt.Errorf("%s warm-up: %d of %d requests succeeded (statuses %v, errors %v)",
			key, res.Succeeded, o.warmup, res.Statuses, res.Errors)
	}
	if t.Spec.Strategy == sluicev1.StrategyCapacity {
		if err := waitFresh(ctx, st, key); err != nil {
			return phaseReport{}, err
		}
	}
	if err := waitIdle(ctx, st, key); err != nil {
		return phaseReport{}, err
	}
	for id, addr := range st.engines {
		if err := adminapi.Post(ctx, httpClient, "http://"+addr+"/debug/reset", http.StatusNoContent); err != nil {
			return phaseReport{}, fmt.Errorf("reset engine %s: %w", id, err)
		}
	}

	fmt.Fprintf(stdout, "Running %s through %s (model %q)...\n", t.Spec.Strategy, key, alias)
	load := base
	load.Mode, load.Rate, load.Duration, load.Seed = loadgen.OpenLoop, o.rate, o.duration, o.seed
	res, err = loadgen.Run(ctx, load)
	if err != nil {
		return phaseReport{}, err
	}
	if err := context.Cause(ctx); err != nil {
		return phaseReport{}, err
	}
	if err := waitIdle(ctx, st, key); err != nil {
		return phaseReport{}, fmt.Errorf("after the %s phase: %w", t.Spec.Strategy, err)
	}
	stats := map[string]enginesim.Stats{}
	for id, addr := range st.engines {
		var s enginesim.Stats
		if err := getJSON(ctx, "http://"+addr+"/debug/stats", &s); err != nil {
			return phaseReport{}, fmt.Errorf("stats of engine %s: %w", id, err)
		}
		stats[id] = s
	}
	return newPhaseReport(o, t, res, stats), nil
}

// hiddenOf returns the hidden load of a member's engine.
func hiddenOf(o *options, id string) int {
	if id == o.hiddenMember {
		return o.hiddenLoad
	}
	return 0
}

// statusKey renders an HTTP status as a JSON object key.
func statusKey(code int) string { return strconv.Itoa(code) }

// seconds returns d in seconds, rounded to the millisecond.
func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }
