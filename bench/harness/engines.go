//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// adminTimeout bounds one call to an admin or debug endpoint; they answer
// from memory, so a second is generous even on a loaded machine.
const adminTimeout = 5 * time.Second

// adminClient is the client of admin and debug endpoints. It keeps no idle
// connection so it never shows up in a measured process's connections.
var adminClient = &http.Client{
	Timeout:   adminTimeout,
	Transport: bearer{&http.Transport{Proxy: nil, DisableKeepAlives: true}},
}

// adminToken is the routers' admin token (their --admin-token-file), sent
// with every admin and debug call; enginesim ignores it.
var adminToken = rand.Text()

// bearer sends adminToken with every request.
type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+adminToken)
	return b.next.RoundTrip(r)
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(ctx context.Context, url string, v any) error {
	return adminapi.GetJSON(ctx, adminClient, url, 4<<20, v)
}

// engineOptions are the enginesim flags a scenario sets.
type engineOptions struct {
	// MaxNumSeqs is --max-num-seqs.
	MaxNumSeqs int
	// HiddenLoad is --hidden-load.
	HiddenLoad int
	// OutputTokens is --output-tokens.
	OutputTokens int
	// TTFTBase, TTFTPerSeq, ITLBase and ITLPerSeq are the latency flags.
	TTFTBase, TTFTPerSeq, ITLBase, ITLPerSeq time.Duration
}

// args returns the command line of one engine serving benchModel (with the
// aliases the router tiers use) on an ephemeral loopback port.
func (o engineOptions) args() []string {
	return []string{
		"--listen", "127.0.0.1:0",
		"--log-level", "info", // the start line is at info; requests log at debug only
		"--model", benchModel,
		"--aliases", benchAliases,
		"--max-num-seqs", fmt.Sprint(o.MaxNumSeqs),
		"--hidden-load", fmt.Sprint(o.HiddenLoad),
		"--output-tokens", fmt.Sprint(o.OutputTokens),
		"--ttft-base", o.TTFTBase.String(),
		"--ttft-per-seq", o.TTFTPerSeq.String(),
		"--itl-base", o.ITLBase.String(),
		"--itl-per-seq", o.ITLPerSeq.String(),
	}
}

// engine is one running enginesim.
type engine struct {
	proc *supervise.Process
	// addr is its HOST:PORT.
	addr string
	// opts are its flags.
	opts engineOptions
}

// url returns the engine's base URL.
func (e *engine) url() string { return "http://" + e.addr }

// startEngines starts n engines; hidden[i] overrides the hidden load of
// engine i.
func (s *supervisor) startEngines(bin, prefix string, n int, opts engineOptions, hidden map[int]int) ([]*engine, error) {
	var out []*engine
	for i := range n {
		o := opts
		if h, ok := hidden[i]; ok {
			o.HiddenLoad = h
		}
		var addr string
		p, err := s.start(fmt.Sprintf("%s-engine%d", prefix, i), bin, startlines.EngineAddr(&addr), o.args()...)
		if err != nil {
			return out, err
		}
		out = append(out, &engine{proc: p, addr: addr, opts: o})
	}
	return out, nil
}

// stats reads the engine's /debug/stats.
func (e *engine) stats(ctx context.Context) (enginesim.Stats, error) {
	var st enginesim.Stats
	err := getJSON(ctx, e.url()+"/debug/stats", &st)
	return st, err
}

// reset lowers the engine's maxima to the current values and zeroes its
// request counters.
func (e *engine) reset(ctx context.Context) error {
	return adminapi.Post(ctx, adminClient, e.url()+"/debug/reset", http.StatusNoContent)
}

// waitEnginesIdle waits until no inference request is inside any engine.
func (s *supervisor) waitEnginesIdle(engines []*engine) error {
	return s.poll("engines idle", func() (bool, error) {
		for _, e := range engines {
			st, err := e.stats(s.ctx)
			if err != nil {
				return false, err
			}
			if st.InFlight != 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// procsOf returns the engines' processes, the start of a scenario's list of
// processes to stop together.
func procsOf(engines []*engine) []*supervise.Process {
	procs := make([]*supervise.Process, 0, len(engines)+3)
	for _, e := range engines {
		procs = append(procs, e.proc)
	}
	return procs
}

// startRouterAndHAProxy starts a router with a RoundRobin and a Capacity
// tier over the engines (every member's ceiling ceiling) and HAProxy in
// front of the same engines (maxconn ceiling), appending both processes
// to procs.
func (s *supervisor) startRouterAndHAProxy(env *runEnv, scenario string, engines []*engine, ceiling int, noDelay bool,
	procs *[]*supervise.Process) (*routerProc, *haproxyProc, error) {
	rt, err := s.startRouter(env.router, scenario+"-router", env.dir(scenario+"-tiers"), twoTiers(engines, ceiling))
	if err != nil {
		return nil, nil, err
	}
	*procs = append(*procs, rt.proc)
	hp, err := s.startHAProxy(env.haproxy, scenario+"-haproxy", env.workDir, haproxyOptions{MaxConn: ceiling, Engines: engines, NoDelay: noDelay})
	if err != nil {
		return nil, nil, err
	}
	*procs = append(*procs, hp.proc)
	return rt, hp, nil
}

// twoTiers are a RoundRobin and a Capacity tier over the engines, every
// member's ceiling ceiling.
func twoTiers(engines []*engine, ceiling int) []tierSpec {
	return []tierSpec{
		{Name: "rr", Alias: aliasRoundRobin, Strategy: "RoundRobin", Ceiling: ceiling, Engines: engines},
		{Name: "cp", Alias: aliasCapacity, Strategy: "Capacity", Ceiling: ceiling, Engines: engines},
	}
}

// capacityTier returns the key of the router's Capacity tier.
func (r *routerProc) capacityTier() string {
	for _, t := range r.tiers {
		if t.Strategy == "Capacity" {
			return t.key()
		}
	}
	return ""
}
