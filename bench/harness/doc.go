//go:build linux

// Command harness is sluice's end-to-end benchmark harness, run by
// `make bench` (through bench/scripts/bench.sh). It builds the router and
// the engine simulator, starts every process it measures on loopback, and
// runs its scenarios, each alternating the systems under test round by
// round in one run:
//
//   - admission core: the admission micro-benchmarks;
//   - proxy overhead: wrk against enginesim directly, through the sluice
//     router (RoundRobin and Capacity tiers) and through HAProxy leastconn
//     with per-server maxconn, at concurrency 1 and 32, then, in a phase of
//     its own, every proxy's system calls per request (perf stat);
//   - hidden load: streaming requests from internal/loadgen over three
//     engines, one of them busy with load the router cannot see, through a
//     RoundRobin tier, a Capacity tier and HAProxy leastconn;
//   - late binding: a burst above the ceilings, then less, over the same
//     engines through Capacity with a queue and ceilings at the engines'
//     slots, and through Capacity and RoundRobin with ceilings above them;
//   - two tenants: two API keys, one sending ten times the other's rate,
//     through one tier with a queue and a per-tenant share, each tenant's
//     wait read from the router's decision records (joined to the
//     responses by X-Request-Id);
//   - SSE streams: 1000 concurrent streams through one router, measuring
//     its memory and the leases left after the streams end.
//
// With -baseline REV it also builds the router of git revision REV and
// measures it beside the work tree's in the proxy overhead and SSE streams
// scenarios. It writes bench/results/results.json, bench/results/summary.md
// and SVG charts; -keep keeps the results of the scenarios not run. Every
// process it starts runs in its own process group and is stopped when the
// harness ends, fails or is interrupted. A process that dies, a failed
// request (in the late binding and two-tenant scenarios, one that the router
// did not refuse with 429 or 503) or a missing measurement makes the harness
// exit non-zero; it never prints a number it did not measure.
package main
