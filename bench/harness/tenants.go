//go:build linux

package main

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/loadgen"
)

// Two-tenant scenario constants. Three idle engines of 8 slots serve about
// 36 requests per second of 32 tokens; the heavy tenant alone offers more,
// so the queue fills with its requests while the light one sends a tenth
// of its rate.
const (
	// tenantEngines is the number of engines.
	tenantEngines = 3
	// tenantMaxNumSeqs is every engine's slot count and every member's
	// ceiling.
	tenantMaxNumSeqs = 8
	// tenantOutputTokens is the tokens every request generates.
	tenantOutputTokens = 32
	// tenantQueueMax is the queue's maxRequests.
	tenantQueueMax = 64
	// tenantQueuePerTenant is its maxRequestsPerTenant: half of the queue,
	// so the heavy tenant can never take the light one's places.
	tenantQueuePerTenant = 32
	// tenantQueueWait is the queue's maxWait: longer than a full tenant
	// share takes to drain (32 requests at about 36 per second).
	tenantQueueWait = 30 * time.Second
	// tenantRateFactor is how many times the light tenant's rate the
	// heavy tenant sends.
	tenantRateFactor = 10
	// tenantMaxInFlight bounds each tenant's requests in flight: above the
	// tier's 24 ceilings plus the queue, so no arrival is dropped by the
	// client.
	tenantMaxInFlight = 512
	// tenantRequestTimeout bounds one request, queueing included.
	tenantRequestTimeout = 120 * time.Second
	// tenantHeavy and tenantLight are the tenants' names in the key file.
	tenantHeavy = "heavy"
	tenantLight = "light"
)

// tenantRow is one tenant's measurements.
type tenantRow struct {
	// Tenant is the tenant's name.
	Tenant string `json:"tenant"`
	// Rate is its mean arrivals per second.
	Rate float64 `json:"rate"`
	// Sent counts its requests.
	Sent int `json:"sent"`
	// Succeeded counts its complete streams.
	Succeeded int `json:"succeeded"`
	// Queue is its time in the router's admission queue, from the
	// router's decision records joined by request id.
	Queue queueWait `json:"queue"`
	// Headers is the client's time to response headers of its requests
	// that succeeded (milliseconds in JSON): the time queued plus the
	// proxy's own, as the client saw it.
	Headers loadgen.Summary `json:"time_to_headers"`
	// E2E is the end-to-end latency of those requests.
	E2E loadgen.Summary `json:"e2e"`
	// Refusals counts its responses outside 2xx by status and code, as
	// the client read them.
	Refusals map[string]int `json:"refusals"`
}

// tenantResult is the two-tenant scenario's measurements.
type tenantResult struct {
	// RunSeconds is the duration of both tenants' open loops.
	RunSeconds float64 `json:"run_seconds"`
	// Engines describes the engines.
	Engines string `json:"engines"`
	// Queue describes the tier's queue.
	Queue string `json:"queue"`
	// Heavy and Light are the two tenants.
	Heavy tenantRow `json:"heavy"`
	// Light is the tenant that sends a tenth of Heavy's rate.
	Light tenantRow `json:"light"`
	// LightVsHeavyWaitP99 is the light tenant's p99 time queued over the
	// heavy tenant's, from the router's records: the figure the target
	// judges.
	LightVsHeavyWaitP99 float64 `json:"light_vs_heavy_wait_p99"`
	// LightVsHeavyHeadersP99 is the same ratio of the client's times to
	// response headers.
	LightVsHeavyHeadersP99 float64 `json:"light_vs_heavy_headers_p99"`
	// LightQueueFull is the light tenant's queue_full records (equal to
	// its client's 429 queue_full responses; the join checks).
	LightQueueFull int `json:"light_queue_full"`
}

// runTenants runs the two-tenant scenario: two keys of the router's key
// file name the tenants, and each tenant's open loop runs at once through
// one Capacity tier with a queue.
func runTenants(env *runEnv) (*tenantResult, error) {
	sup, o := env.sup, env.opts
	eo := engineOptions{
		MaxNumSeqs: tenantMaxNumSeqs, OutputTokens: tenantOutputTokens,
		TTFTBase: 50 * time.Millisecond, TTFTPerSeq: 5 * time.Millisecond,
		ITLBase: 10 * time.Millisecond, ITLPerSeq: time.Millisecond,
	}
	engines, err := sup.startEngines(env.enginesim, "tenants", tenantEngines, eo, nil)
	if err != nil {
		return nil, err
	}
	procs := procsOf(engines)
	defer func() { stopGroup(procs) }()
	q := queueSpec{MaxRequests: tenantQueueMax, MaxWait: tenantQueueWait, MaxPerTenant: tenantQueuePerTenant}
	tier := tierSpec{Name: "tq", Alias: aliasTenants, Strategy: "Capacity", Ceiling: tenantMaxNumSeqs, Engines: engines, Queue: &q}
	heavyKey, lightKey := "sk-"+rand.Text(), "sk-"+rand.Text()
	keysFile := filepath.Join(env.workDir, "tenants.keys")
	keys := fmt.Sprintf("%s tenant=%s\n%s tenant=%s\n", heavyKey, tenantHeavy, lightKey, tenantLight)
	if err := os.WriteFile(keysFile, []byte(keys), 0o600); err != nil {
		return nil, err
	}
	decisions := filepath.Join(env.workDir, "tenants-decisions.jsonl")
	rt, err := sup.startRouter(env.router, "tenants-router", env.dir("tenants-tiers"), []tierSpec{tier},
		"--api-keys-file", keysFile, "--decision-log-file", decisions)
	if err != nil {
		return nil, err
	}
	procs = append(procs, rt.proc)
	if err := primeCapacityWith(env, rt, tier.key(), heavyKey); err != nil {
		return nil, err
	}

	heavyRate := o.tenantRate
	lightRate := heavyRate / tenantRateFactor
	env.progress("two tenants: %s %.0f req/s and %s %.1f req/s for %v", tenantHeavy, heavyRate, tenantLight, lightRate, o.tenantRun)
	heavyClient, heavyProbe := newProbeClient(tenantMaxInFlight)
	lightClient, lightProbe := newProbeClient(tenantMaxInFlight)
	cfg := func(key string, rate float64, seed uint64, c *http.Client) loadgen.Config {
		return loadgen.Config{
			BaseURL: rt.url(), APIKey: key, Model: tier.Alias, Mode: loadgen.OpenLoop, Rate: rate,
			Concurrency: tenantMaxInFlight, Seed: seed, Duration: o.tenantRun, RequestTimeout: tenantRequestTimeout, Client: c,
		}
	}
	rs, err := runPhases(sup.ctx, []loadPhase{
		{Config: cfg(heavyKey, heavyRate, 1, heavyClient)},
		{Config: cfg(lightKey, lightRate, 2, lightClient)},
	})
	if err != nil {
		return nil, err
	}
	if err := sup.err(); err != nil {
		return nil, err
	}
	res := &tenantResult{
		RunSeconds: o.tenantRun.Seconds(),
		Engines: fmt.Sprintf("%d enginesim, --max-num-seqs %d, --output-tokens %d, default latencies (ttft 50ms+5ms/seq, itl 10ms+1ms/seq), no hidden load",
			tenantEngines, tenantMaxNumSeqs, tenantOutputTokens),
		Queue: fmt.Sprintf("one Capacity tier, ceilings %d, queue {maxRequests: %d, maxWait: %s, maxRequestsPerTenant: %d}",
			tenantMaxNumSeqs, tenantQueueMax, tenantQueueWait, tenantQueuePerTenant),
	}
	if err := requireIdleRouter(env, rt); err != nil {
		return nil, err
	}
	records, err := stopAndReadDecisions(rt, decisions, heavyProbe, lightProbe)
	if err != nil {
		return nil, err
	}
	for _, t := range []struct {
		dst  *tenantRow
		name string
		rate float64
		r    *loadgen.Result
		p    *probe
	}{{&res.Heavy, tenantHeavy, heavyRate, rs[0], heavyProbe}, {&res.Light, tenantLight, lightRate, rs[1], lightProbe}} {
		c := combine(t.r)
		headers, refusals := t.p.snapshot()
		if err := checkRefusalsOnly("tenant "+t.name, c, refusals); err != nil {
			return nil, err
		}
		seen, unidentified := t.p.responses()
		qw, err := joinQueueWait(seen, unidentified, records, refusals[queueFullKey])
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.name, err)
		}
		*t.dst = tenantRow{
			Tenant: t.name, Rate: t.rate, Sent: c.Sent, Succeeded: c.Succeeded,
			Queue: qw, Headers: headers, E2E: c.E2E.Summary(), Refusals: refusals,
		}
	}
	return res, summarizeTenants(res)
}

// stopAndReadDecisions stops the router, which writes every queued record
// and closes its decision log, and reads the records of the responses the
// probes saw. A router that did not exit cleanly may have lost records.
func stopAndReadDecisions(rt *routerProc, path string, probes ...*probe) (map[string]evidence.Record, error) {
	rt.proc.Stop()
	if err := rt.proc.ExitErr(); err != nil {
		return nil, fmt.Errorf("%s did not exit cleanly, so its decision log may be incomplete: %w", rt.proc.Name(), err)
	}
	var seen [][]seenResponse
	for _, p := range probes {
		s, _ := p.responses()
		seen = append(seen, s)
	}
	return readDecisionLog(path, wantedIDs(seen...))
}

// summarizeTenants computes the ratios and the count the targets judge:
// the light tenant's p99 time queued over the heavy tenant's (the router's
// figure, which the target judges) and the same ratio of the client's
// times to response headers.
func summarizeTenants(res *tenantResult) error {
	if res.Light.Queue.Wait.Count == 0 || res.Heavy.Queue.Wait.Count == 0 ||
		res.Light.Headers.Count == 0 || res.Heavy.Headers.Count == 0 {
		return fmt.Errorf("two tenants: %w", errNoSamples)
	}
	var err error
	res.LightVsHeavyWaitP99, err = ratio(loadgen.Milliseconds(res.Light.Queue.Wait.P99), loadgen.Milliseconds(res.Heavy.Queue.Wait.P99))
	if err != nil {
		return fmt.Errorf("two tenants: queue wait: %w", err)
	}
	res.LightVsHeavyHeadersP99, err = ratio(loadgen.Milliseconds(res.Light.Headers.P99), loadgen.Milliseconds(res.Heavy.Headers.P99))
	if err != nil {
		return fmt.Errorf("two tenants: time to headers: %w", err)
	}
	res.LightQueueFull = res.Light.Queue.QueueFull
	return nil
}
