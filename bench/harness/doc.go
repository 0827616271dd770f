//go:build linux

// Command harness is sluice's end-to-end benchmark harness, run by
// `make bench` (through bench/scripts/bench.sh). It builds the router and
// the engine simulator, starts every process it measures on loopback, and
// runs three scenarios, each alternating the systems under test round by
// round in one run:
//
//   - proxy overhead: wrk against enginesim directly, through the sluice
//     router (RoundRobin and Capacity tiers) and through HAProxy leastconn
//     with per-server maxconn, at concurrency 1 and 32;
//   - hidden load: streaming requests from internal/loadgen over three
//     engines, one of them busy with load the router cannot see, through a
//     RoundRobin tier, a Capacity tier and HAProxy leastconn;
//   - SSE streams: 1000 concurrent streams through one router, measuring
//     its memory and the leases left after the streams end.
//
// It writes bench/results/results.json, bench/results/summary.md and SVG
// charts. Every process it starts runs in its own process group and is
// stopped when the harness ends, fails or is interrupted. A process that
// dies, a failed request or a missing measurement makes the harness exit
// non-zero; it never prints a number it did not measure.
package main
