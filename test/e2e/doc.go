// Package e2e holds sluice's multi-process tests: they build the real
// router and enginesim binaries and run them as processes on loopback, the
// way an operator runs them in files mode, and talk to them over HTTP only
// (the official OpenAI Go client included).
//
// The tests cover what only whole processes show: streams relayed byte for
// byte, ceilings held as the engines count them under heavy concurrency,
// leases released when an engine is killed mid-stream, and a router
// draining its streams on SIGTERM; and one integrated workload that checks
// placement, ceilings, drains, stalled scrapes, an upstream error and the
// decision log in a single run. Every process runs in its own process
// group and is stopped by its test; ports are chosen by the kernel
// (127.0.0.1:0) and read from the processes' logs. The package must never
// reach beyond loopback, sleep to wait for a condition, or leave a process
// running.
package e2e
