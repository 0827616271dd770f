//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/loadgen"
)

// options are the harness's flags.
type options struct {
	repo           string
	rerender       bool
	keep           bool
	out            string
	work           string
	scenarios      map[string]bool
	overheadRounds int
	overheadRun    time.Duration
	hiddenRounds   int
	hiddenRun      time.Duration
	hiddenWarmup   time.Duration
	hiddenRate     float64
	lateRounds     int
	lateBurst      time.Duration
	lateBurstRate  float64
	lateLull       time.Duration
	lateLullRate   float64
	tenantRun      time.Duration
	tenantRate     float64
	// baseline is the git revision of the router measured beside the
	// work tree's (-baseline); empty measures none.
	baseline string
	// syscallRequests is the request count of the overhead scenario's
	// system call phase, per system.
	syscallRequests int
}

// scenarioNames are the scenarios in run order.
var scenarioNames = []string{"core", "overhead", "hidden", "latebinding", "tenants", "streams"}

// scenarioTitles are the scenarios' names in progress lines and in the
// CPU and load average records.
var scenarioTitles = map[string]string{
	"core": "admission core", "overhead": "proxy overhead", "hidden": "hidden load",
	"latebinding": "late binding", "tenants": "two tenants", "streams": "SSE streams",
}

// parseOptions parses the command line.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("harness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.repo, "repo", ".", "repository root: the router and enginesim are built from it")
	fs.StringVar(&o.out, "out", "bench/results", "directory of the published results (JSON, Markdown, SVG)")
	fs.StringVar(&o.work, "work", "out/bench", "directory of binaries, configurations and process logs")
	scen := fs.String("scenarios", strings.Join(scenarioNames, ","), "comma-separated scenarios to run: "+strings.Join(scenarioNames, ", "))
	fs.IntVar(&o.overheadRounds, "overhead-rounds", 5, "alternating rounds of the proxy overhead scenario")
	fs.DurationVar(&o.overheadRun, "overhead-run", 4*time.Second, "duration of each wrk run (whole seconds)")
	fs.IntVar(&o.hiddenRounds, "hidden-rounds", 3, "alternating rounds of the hidden load scenario")
	fs.DurationVar(&o.hiddenRun, "hidden-run", 20*time.Second, "duration of each hidden load run")
	fs.DurationVar(&o.hiddenWarmup, "hidden-warmup", 3*time.Second, "unrecorded run per system before the first hidden load round")
	fs.Float64Var(&o.hiddenRate, "hidden-rate", 12, "mean arrivals per second of the hidden load scenario (Poisson)")
	fs.IntVar(&o.lateRounds, "late-rounds", 1, "alternating rounds of the late binding scenario")
	fs.DurationVar(&o.lateBurst, "late-burst", 5*time.Second, "duration of the late binding scenario's burst")
	fs.Float64Var(&o.lateBurstRate, "late-burst-rate", 45, "mean arrivals per second of the burst (Poisson)")
	fs.DurationVar(&o.lateLull, "late-lull", 12*time.Second, "duration of the lower load after the burst")
	fs.Float64Var(&o.lateLullRate, "late-lull-rate", 8, "mean arrivals per second after the burst (Poisson)")
	fs.DurationVar(&o.tenantRun, "tenant-run", 50*time.Second, "duration of the two-tenant scenario's open loops")
	fs.Float64Var(&o.tenantRate, "tenant-rate", 40, "mean arrivals per second of the heavy tenant (Poisson); the light tenant sends a tenth")
	fs.StringVar(&o.baseline, "baseline", "", "git revision of this repository whose router is built and measured beside the work tree's in the overhead and streams scenarios (e.g. main, HEAD~3)")
	fs.IntVar(&o.syscallRequests, "syscall-requests", 5000, "requests per system of the overhead scenario's system call phase (perf stat)")
	fs.BoolVar(&o.keep, "keep", false, "keep the results of the scenarios not run from the results.json in -out (each marked with its run's date and commit)")
	fs.BoolVar(&o.rerender, "rerender", false, "measure nothing: rewrite summary.md and the charts from the results.json in -out")
	quick := fs.Bool("quick", false, "one short round of everything: checks the harness works, numbers are not meaningful")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *quick {
		o.overheadRounds, o.overheadRun = 1, time.Second
		o.hiddenRounds, o.hiddenRun, o.hiddenWarmup = 1, 3*time.Second, time.Second
		o.lateRounds, o.lateBurst, o.lateLull = 1, 2*time.Second, 3*time.Second
		o.tenantRun = 3 * time.Second
		o.syscallRequests = 1000
	}
	o.scenarios = map[string]bool{}
	for _, s := range strings.Split(*scen, ",") {
		s = strings.TrimSpace(s)
		if !containsString(scenarioNames, s) {
			return o, fmt.Errorf("unknown scenario %q (want some of %s)", s, strings.Join(scenarioNames, ", "))
		}
		o.scenarios[s] = true
	}
	switch {
	case o.overheadRounds < 1 || o.hiddenRounds < 1 || o.lateRounds < 1:
		return o, errors.New("rounds must be at least 1")
	case o.overheadRun < time.Second || o.overheadRun%time.Second != 0:
		return o, errors.New("-overhead-run must be whole seconds, at least 1s")
	case o.hiddenRun < time.Second || o.hiddenWarmup < time.Second:
		return o, errors.New("-hidden-run and -hidden-warmup must be at least 1s")
	case o.hiddenRate <= 0 || o.hiddenRate > 1000:
		return o, errors.New("-hidden-rate must be within (0, 1000]")
	case o.lateBurst < time.Second || o.lateLull < time.Second || o.tenantRun < time.Second:
		return o, errors.New("-late-burst, -late-lull and -tenant-run must be at least 1s")
	case !(o.lateBurstRate > 0 && o.lateBurstRate <= 1000) || !(o.lateLullRate > 0 && o.lateLullRate <= 1000):
		return o, errors.New("-late-burst-rate and -late-lull-rate must be within (0, 1000]")
	case !(o.tenantRate > 0 && o.tenantRate <= 1000):
		return o, errors.New("-tenant-rate must be within (0, 1000]")
	case o.syscallRequests < saturationConns:
		return o, fmt.Errorf("-syscall-requests must be at least %d (the phase's concurrency)", saturationConns)
	case strings.HasPrefix(o.baseline, "-"):
		return o, fmt.Errorf("-baseline %q is not a revision", o.baseline)
	}
	return o, nil
}

// containsString reports whether xs holds x.
func containsString(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// runEnv is what every scenario needs.
type runEnv struct {
	opts    options
	sup     *supervisor
	workDir string
	// router, enginesim, bareproxy, haproxy, wrk and perf are the
	// binaries (perf only when the overhead scenario runs).
	router, enginesim, bareproxy, haproxy, wrk, perf string
	// baseline is the router built from -baseline; nil without it.
	baseline *baselineRouter
	stderr   io.Writer
	started  time.Time
}

// dir returns a subdirectory of the work directory.
func (e *runEnv) dir(name string) string { return filepath.Join(e.workDir, name) }

// progress prints one progress line to stderr.
func (e *runEnv) progress(format string, args ...any) {
	fmt.Fprintf(e.stderr, "[%6.1fs] %s\n", time.Since(e.started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench harness: FAILED:", err)
		os.Exit(1)
	}
}

// run runs the selected scenarios and writes the results.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if o.rerender {
		return rerender(o.out, stderr)
	}
	env := &runEnv{opts: o, stderr: stderr, started: time.Now()}
	if env.workDir, err = filepath.Abs(filepath.Join(o.work, "run-"+time.Now().UTC().Format("20060102-150405"))); err != nil {
		return err
	}
	if err := os.MkdirAll(env.workDir, 0o750); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o750); err != nil {
		return err
	}
	env.sup = newSupervisor(ctx, env.workDir)
	defer env.sup.stopAll()
	env.progress("work directory (logs, configurations): %s", env.workDir)

	for _, tool := range []struct {
		dst  *string
		name string
	}{{&env.haproxy, "haproxy"}, {&env.wrk, "wrk"}} {
		p, err := exec.LookPath(tool.name)
		if err != nil {
			return fmt.Errorf("%s not found on PATH (bench/scripts/bench.sh installs it with apt-get): %w", tool.name, err)
		}
		*tool.dst = p
	}
	if o.scenarios["overhead"] {
		if env.perf, err = exec.LookPath("perf"); err != nil {
			return fmt.Errorf("perf not found on PATH (bench/scripts/bench.sh installs linux-perf with apt-get): %w", err)
		}
	}
	if err := buildBinaries(env); err != nil {
		return err
	}
	if o.baseline != "" {
		if env.baseline, err = buildBaseline(env); err != nil {
			return err
		}
	}
	// prev holds the results -keep keeps, read before anything runs so a
	// missing or broken file fails at once.
	prev, err := keptFrom(o)
	if err != nil {
		return err
	}
	results := &results{Meta: collectMeta(env)}
	if b := env.baseline; b != nil {
		results.Meta.Baseline = &baselineMeta{Revision: b.revision, Commit: b.commit}
	}
	scenarios := []struct {
		key string
		run func() error
	}{
		{"core", func() (err error) { results.Core, err = runCore(env); return err }},
		{"overhead", func() (err error) { results.Overhead, err = runOverhead(env); return err }},
		{"hidden", func() (err error) { results.Hidden, err = runHiddenLoad(env); return err }},
		{"latebinding", func() (err error) { results.Late, err = runLateBinding(env); return err }},
		{"tenants", func() (err error) { results.Tenants, err = runTenants(env); return err }},
		{"streams", func() error { return runStreamsScenario(env, results) }},
	}
	for _, sc := range scenarios {
		if !o.scenarios[sc.key] {
			continue
		}
		name := scenarioTitles[sc.key]
		results.Meta.LoadAvg = append(results.Meta.LoadAvg, loadAvg("before "+name))
		start, err := env.sup.cpuMark()
		if err != nil {
			return err
		}
		if err := sc.run(); err != nil {
			return scenarioError(env, name, err)
		}
		end, err := env.sup.cpuMark()
		if err != nil {
			return err
		}
		u := usageSince(name, start, end, runtime.NumCPU())
		results.Meta.CPU = append(results.Meta.CPU, u)
		env.progress("%s: %.0f s; CPU used by other processes on the machine: %.0f%% of its capacity", name, u.WallSeconds, 100*u.OtherShare)
	}
	if prev != nil {
		keepResults(results, prev, o.scenarios)
	}
	results.Meta.LoadAvg = append(results.Meta.LoadAvg, loadAvg("end"))
	results.Meta.WallSeconds = time.Since(env.started).Seconds()
	if err := writeResults(env, results); err != nil {
		return err
	}
	env.progress("done in %.0fs; results in %s", time.Since(env.started).Seconds(), o.out)
	return nil
}

// keptFrom reads the results -keep keeps; nil without -keep.
func keptFrom(o options) (*results, error) {
	if !o.keep {
		return nil, nil
	}
	r, err := readResults(o.out)
	if err != nil {
		return nil, fmt.Errorf("-keep: %w", err)
	}
	return r, nil
}

// scenarioError names the scenario and prefers the supervisor's cause (a
// process that died, an interrupt) over the error it produced.
func scenarioError(env *runEnv, name string, err error) error {
	if cause := env.sup.err(); cause != nil {
		err = cause
	}
	return fmt.Errorf("%s: %w", name, err)
}

// buildBinaries builds the router, enginesim and the bare proxy into the bin directory
// under -work (shared by runs, so old runs leave only their logs).
func buildBinaries(env *runEnv) error {
	bin, err := filepath.Abs(filepath.Join(env.opts.work, "bin"))
	if err != nil {
		return err
	}
	for _, b := range []struct {
		dst *string
		pkg string
	}{{&env.router, "./cmd/router"}, {&env.enginesim, "./cmd/enginesim"}, {&env.bareproxy, "./bench/bareproxy"}} {
		*b.dst = filepath.Join(bin, filepath.Base(b.pkg))
		env.progress("go build -o %s %s", *b.dst, b.pkg)
		cmd := exec.CommandContext(env.sup.ctx, "go", "build", "-o", *b.dst, b.pkg) //nolint:gosec // fixed package paths.
		cmd.Dir = env.opts.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return nil
}

// primeCapacity sends one small request through a Capacity tier, which
// makes the router sample its members' pressure, and waits until every
// member's pressure is fresh: the tier then ranks with engine pressure
// from its first measured request, as it does under continuous traffic.
func primeCapacity(env *runEnv, rt *routerProc, tierKey string) error {
	return primeCapacityWith(env, rt, tierKey, "")
}

// primeCapacityWith is primeCapacity with the API key apiKey ("" sends
// none).
func primeCapacityWith(env *runEnv, rt *routerProc, tierKey, apiKey string) error {
	var alias string
	for _, t := range rt.tiers {
		if t.key() == tierKey {
			alias = t.Alias
		}
	}
	r, err := loadgen.Run(env.sup.ctx, loadgen.Config{
		BaseURL: rt.url(), APIKey: apiKey, Model: alias, NoStream: true, MaxTokens: 1,
		Concurrency: 1, Requests: 1, RequestTimeout: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := checkLoad("priming "+tierKey, r); err != nil {
		return err
	}
	return requireFresh(env, rt, tierKey)
}

// requireFresh waits until every member of the tier has fresh pressure.
func requireFresh(env *runEnv, rt *routerProc, tierKey string) error {
	var last []string
	err := env.sup.poll("fresh pressure on "+tierKey, func() (bool, error) {
		f, err := rt.freshness(env.sup.ctx, tierKey)
		if err != nil {
			return false, err
		}
		last = f
		for _, v := range f {
			if v != "fresh" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last seen: %v)", err, last)
	}
	return nil
}

// requireIdleRouter checks that a router holds no lease once its load
// ended (a leak would distort the next measurement).
func requireIdleRouter(env *runEnv, rt *routerProc) error {
	return env.sup.poll("router leases back to zero", func() (bool, error) {
		c, err := rt.capacity(env.sup.ctx)
		if err != nil {
			return false, err
		}
		return activeOf(c) == 0, nil
	})
}

// loadSample is the machine's load average at one point of the run.
type loadSample struct {
	// At names the point.
	At string `json:"at"`
	// LoadAvg is the first three fields of /proc/loadavg.
	LoadAvg string `json:"loadavg"`
}

// loadAvg samples /proc/loadavg; other engineers' builds and tests share
// the machine, and this is the trace they leave.
func loadAvg(at string) loadSample {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return loadSample{At: at, LoadAvg: "unavailable"}
	}
	f := strings.Fields(string(b))
	return loadSample{At: at, LoadAvg: strings.Join(f[:min(3, len(f))], " ")}
}

// meta describes the run and the machine.
type meta struct {
	Date        string       `json:"date"`
	GoVersion   string       `json:"go_version"`
	CPUs        int          `json:"cpus"`
	Kernel      string       `json:"kernel"`
	HAProxy     string       `json:"haproxy"`
	Wrk         string       `json:"wrk"`
	Commit      string       `json:"commit"`
	LoadAvg     []loadSample `json:"loadavg"`
	CPU         []cpuUsage   `json:"cpu"`
	WallSeconds float64      `json:"wall_seconds"`
	// Kept names the earlier runs whose scenarios this one kept (-keep).
	Kept []keptRun `json:"kept,omitempty"`
	// Baseline names the revision whose router the overhead and streams
	// scenarios measured beside this one (-baseline).
	Baseline *baselineMeta `json:"baseline,omitempty"`
}

// collectMeta describes the machine; a tool that cannot say its version
// is recorded as such, not guessed.
func collectMeta(env *runEnv) meta {
	first := func(name string, args ...string) string {
		cmd := exec.CommandContext(env.sup.ctx, name, args...) //nolint:gosec // fixed tool invocations.
		cmd.Dir = env.opts.repo
		out, _ := cmd.CombinedOutput()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		if line == "" {
			return "unknown"
		}
		return line
	}
	return meta{
		Date:      time.Now().UTC().Format(time.RFC3339),
		GoVersion: runtime.Version(),
		CPUs:      runtime.NumCPU(),
		Kernel:    first("uname", "-sr"),
		HAProxy:   first(env.haproxy, "-v"),
		Wrk:       first(env.wrk, "-v"),
		Commit:    first("git", "rev-parse", "--short", "HEAD"),
	}
}
