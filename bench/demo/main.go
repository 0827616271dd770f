// Command demo is sluice's one-command demo (`make demo`, docs/DEMO.md).
//
// In files mode, with no cluster, it starts three enginesim processes on
// loopback, one of them with hidden external load occupying most of its
// slots, and a router serving the two tiers of config/samples/demo (a
// RoundRobin and a Capacity tier over the same three engines, with member
// ceilings). It then drives the same open-loop workload through the
// RoundRobin tier and then through the Capacity tier and prints, per
// strategy: each member's share of the requests, the highest concurrency
// each engine saw (from its own /debug/stats) against the member's ceiling,
// p50/p99 time to first token and end-to-end latency, and refusals (503). It
// writes a JSON report and an SVG chart under --out.
//
// It exits non-zero when a process it started dies, an engine saw more
// concurrent requests than its ceiling, a request failed other than by a
// 503 refusal, or the router kept a lease after a phase. Every process it
// starts runs in its own process group and is stopped on every exit path,
// Ctrl-C included.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/cmdline"
)

// Defaults of the workload and the simulated engines, tuned so that one run
// takes about a minute on a shared 2-core machine (docs/DEMO.md explains the
// choice).
const (
	// defaultRate is the mean arrival rate (requests per second) of the
	// open-loop workload: a third of it is above what the busy member
	// serves with its two free slots (≈2.8/s), while the three members
	// together serve far more.
	defaultRate = 10
	// defaultDuration is how long each phase sends requests.
	defaultDuration = 20 * time.Second
	// defaultMaxTokens is each request's output length.
	defaultMaxTokens = 32
	// defaultMaxNumSeqs is each engine's number of running slots; equal to
	// the member ceilings of config/samples/demo.
	defaultMaxNumSeqs = 8
	// defaultHiddenLoad is the busy engine's hidden sequences: six of its
	// eight slots, invisible to the router except through the engine's
	// metrics.
	defaultHiddenLoad = 6
	// defaultHiddenMember is the member whose engine runs the hidden load.
	defaultHiddenMember = "gpu2"
	// defaultWarmup is the number of requests sent one at a time before
	// each phase (not measured): they make the readiness and pressure
	// caches warm, as they are on a router that has been serving.
	defaultWarmup = 6
	// Simulated latencies: prefill and inter-token delay grow with the
	// running batch (hidden load included), so the busy engine is slower
	// for every request it serves.
	defaultTTFTBase   = 20 * time.Millisecond
	defaultTTFTPerSeq = 5 * time.Millisecond
	defaultITLBase    = 5 * time.Millisecond
	defaultITLPerSeq  = 2 * time.Millisecond
	// routerShutdownTimeout is the router's --shutdown-timeout, below
	// supervise.DefaultStopGrace so that SIGTERM always ends it before a
	// SIGKILL.
	routerShutdownTimeout = 5 * time.Second
	// maxRequestTimeout bounds one demo request; a request of the demo
	// takes a few seconds at most, so reaching it means something hung.
	maxRequestTimeout = 60 * time.Second
	// exitFailure and exitInterrupted are the exit codes besides 0 and
	// a usage error's cmdline.ExitUsage.
	exitFailure     = 1
	exitInterrupted = 130
)

// options is the parsed command line.
type options struct {
	binDir       string
	samplesDir   string
	outDir       string
	rate         float64
	duration     time.Duration
	maxTokens    int
	seed         uint64
	warmup       int
	hiddenMember string
	hiddenLoad   int
	maxNumSeqs   int
	ttftBase     time.Duration
	ttftPerSeq   time.Duration
	itlBase      time.Duration
	itlPerSeq    time.Duration
}

// help is the demo's help besides its flags.
var help = cmdline.Help{
	Name:     "demo",
	Synopsis: "[flags]",
	Summary: "demo starts three enginesims and a router in files mode, drives the same workload through a\n" +
		"RoundRobin and a Capacity tier, and prints each member's share, the engines' peak concurrency\n" +
		"against the ceilings, and latencies (docs/DEMO.md). `make demo` runs it.",
	Examples: []cmdline.Example{
		{Comment: "what make demo runs, from the repository root", Command: "demo --bin bin --samples config/samples/demo --out out"},
		{Comment: "a longer run at a higher rate", Command: "demo --bin bin --rate 20 --duration 60s"},
	},
}

// parseFlags parses args: help and version are printed to out; every
// error is a usage error, returned.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	cmd := cmdline.New(help)
	fs := cmd.Flags
	fs.StringVar(&o.binDir, "bin", "bin", "directory holding the router and enginesim binaries")
	fs.StringVar(&o.samplesDir, "samples", filepath.Join("config", "samples", "demo"), "directory of the demo's ReplicaTier manifests")
	fs.StringVar(&o.outDir, "out", "out", "output directory: the report, the chart and out/demo/ (logs, rewritten manifests)")
	fs.Float64Var(&o.rate, "rate", defaultRate, "mean arrivals per second (open loop, Poisson)")
	fs.DurationVar(&o.duration, "duration", defaultDuration, "how long each phase sends requests")
	fs.IntVar(&o.maxTokens, "max-tokens", defaultMaxTokens, "output tokens per request")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the arrival schedule (both phases use the same schedule)")
	fs.IntVar(&o.warmup, "warmup", defaultWarmup, "unmeasured requests sent before each phase")
	fs.StringVar(&o.hiddenMember, "hidden-member", defaultHiddenMember, "member whose engine runs hidden load")
	fs.IntVar(&o.hiddenLoad, "hidden-load", defaultHiddenLoad, "slots held by hidden load on that engine")
	fs.IntVar(&o.maxNumSeqs, "max-num-seqs", defaultMaxNumSeqs, "running slots of each engine")
	fs.DurationVar(&o.ttftBase, "ttft-base", defaultTTFTBase, "enginesim --ttft-base")
	fs.DurationVar(&o.ttftPerSeq, "ttft-per-seq", defaultTTFTPerSeq, "enginesim --ttft-per-seq")
	fs.DurationVar(&o.itlBase, "itl-base", defaultITLBase, "enginesim --itl-base")
	fs.DurationVar(&o.itlPerSeq, "itl-per-seq", defaultITLPerSeq, "enginesim --itl-per-seq")
	if err := cmd.Parse(args, out, out); err != nil {
		return options{}, err
	}
	switch {
	case fs.NArg() > 0:
		return options{}, cmdline.Usagef("unexpected arguments %q", fs.Args())
	case o.rate <= 0:
		return options{}, cmdline.Usagef("--rate must be positive")
	case o.duration <= 0:
		return options{}, cmdline.Usagef("--duration must be positive")
	case o.maxTokens < 1:
		return options{}, cmdline.Usagef("--max-tokens must be at least 1")
	case o.warmup < 1:
		return options{}, cmdline.Usagef("--warmup must be at least 1 (it warms the pressure cache)")
	case o.maxNumSeqs < 1 || o.hiddenLoad < 0 || o.hiddenLoad >= o.maxNumSeqs:
		return options{}, cmdline.Usagef("--hidden-load must be within 0..max-num-seqs-1")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stdout)
	if err != nil {
		os.Exit(cmdline.Report(help.Name, err, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	start := time.Now()
	err = run(ctx, o, os.Stdout)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "demo: interrupted; every process it started has been stopped")
		os.Exit(exitInterrupted)
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo: FAILED after %v: %v\n", time.Since(start).Round(time.Second), err)
		os.Exit(exitFailure)
	}
	fmt.Printf("demo: OK in %v; every process it started has been stopped\n", time.Since(start).Round(time.Second))
}
