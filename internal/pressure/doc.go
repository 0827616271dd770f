// Package pressure samples the upstream pressure of the members of Capacity
// tiers and serves it to the request path without ever making it wait.
//
// It owns three things: the engine adapters that read one Prometheus text
// exposition (vLLM, SGLang, llama.cpp, TGI, trtllm-serve, Triton
// TensorRT-LLM, or the series a member names) into a scheduler.Telemetry, the
// HTTPCollector that fetches that exposition with a time and size bound, and
// the Cache that keeps one normalized scheduler.Pressure per registered
// (tier, member), refreshed by internal/memberpoll's runtime on at most
// MaxWorkers goroutines, with the fetch's classification (Classify) that
// the metrics count.
//
// The package must never block a Snapshot or Peek on I/O, hold its lock while
// collecting, start a goroutine per request, member or tier, retain raw
// metrics text or collection errors, or let an engine's series names leave an
// adapter: everything outside this package sees only Telemetry and Pressure.
// It never ranks members; scheduler.Normalize is the only judge of whether a
// sample is usable.
package pressure
