// Package loadgen generates OpenAI-style inference load and measures it: a
// library for sluice's demo, its end-to-end tests and its benchmark harness.
//
// A Config names the endpoint, the request (chat completions, completions or
// Responses, streaming or not) and the schedule: closed loop (Concurrency
// workers, each sending its next request when the previous one ended) or
// open loop (Poisson arrivals at a mean Rate, sent whether or not earlier
// requests finished). Run sends the load and returns a Result: requests sent,
// statuses, failures by kind, counts of one response header (such as the
// router's X-Sluice-Member) and the distributions of time to first token,
// inter-token latency and end-to-end latency with their quantiles.
//
// Streams are read event by event by a small SSE client of this package, so
// each token is timed when it arrives; a load tool that reads whole bodies
// (such as vegeta) cannot measure time to first token. Quantiles are
// the empirical quantiles of the kept samples.
//
// Time comes from an injected k8s.io/utils/clock.Clock, so tests can drive
// the measurements with a fake clock. Run owns every goroutine it starts and
// returns only after all of them ended. The package must never retry a
// request, log, or keep a response body beyond the event (or the
// non-streaming body) being parsed.
package loadgen
