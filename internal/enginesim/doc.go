// Package enginesim simulates one OpenAI-compatible inference engine (a vLLM,
// SGLang, llama.cpp or TGI process) for sluice's tests, demo and benchmarks.
//
// It owns an http.Handler (Server) serving /v1/models, /v1/chat/completions,
// /v1/completions, /v1/responses (with and without SSE), /v1/embeddings,
// /health, /metrics and the /debug/stats and /debug/reset endpoints, and the
// Engine behind it: a continuous-batching model with a fixed number of
// running slots, a FIFO waiting queue, time to first token and inter-token
// latency that grow with the running batch, KV-cache usage from the tokens in
// flight, optional hidden external load, fault injection (error rate,
// stalls, malformed or truncated SSE, slow, failing or oversized metrics, and
// per-request faults chosen by a request header when allowed), and an
// optional request log of every inference request's id and the engine's
// live count at its arrival.
//
// Time comes from an injected k8s.io/utils/clock.Clock, so tests drive it
// with a fake clock; Engine.Await lets a test wait for a state without
// sleeping. A zero latency never touches the clock.
//
// The package must never start a goroutine of its own (every goroutine that
// runs its code is a net/http request goroutine), log prompts or bodies,
// read more of a request than the fields it simulates, or hold its lock
// while writing to a connection.
package enginesim
