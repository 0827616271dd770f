package enginesim

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Bounds on Config values.
const (
	// MaxModelNameLen bounds the served model id; Hugging Face ids are far
	// shorter, and the id is echoed in every response and metric label.
	MaxModelNameLen = 256
	// MaxAliases bounds --aliases, as a ReplicaTier bounds its aliases.
	MaxAliases = bounds.MaxAliases
	// MaxNumSeqsLimit bounds --max-num-seqs. Real engines batch at most a few
	// hundred sequences; the bound keeps a typo from meaning "unlimited".
	MaxNumSeqsLimit = 4096
	// MaxOutputTokensLimit bounds the tokens one request may generate
	// (--output-tokens and the request's max_tokens). It is the largest
	// output a common long-context model allows and keeps one zero-latency
	// request from building an unbounded body.
	MaxOutputTokensLimit = 65536
	// MaxKVCapacityTokens bounds --kv-capacity-tokens (2^30 tokens, far above
	// any single GPU's KV cache).
	MaxKVCapacityTokens = 1 << 30
	// MaxHiddenLoadTokens bounds the tokens each hidden sequence holds.
	MaxHiddenLoadTokens = 1 << 20
	// MaxEmbeddingDim bounds --embedding-dim; real embedding models use at
	// most a few thousand dimensions.
	MaxEmbeddingDim = 4096
	// MaxSimDuration bounds every simulated duration (latencies, stalls,
	// metrics delay). Ten minutes is far above any realistic value and
	// rejects unit typos such as "50m" for "50ms".
	MaxSimDuration = 10 * time.Minute
)

// Defaults used by DefaultConfig and the enginesim flags.
const (
	// DefaultModel is the served model id when --model is not given.
	DefaultModel = "enginesim"
	// DefaultMaxNumSeqs is the default number of running slots; small enough
	// that a demo queues visibly.
	DefaultMaxNumSeqs = 16
	// DefaultOutputTokens is the number of tokens generated when a request
	// names no limit.
	DefaultOutputTokens = 64
	// DefaultKVCapacityTokens is the default KV cache size in tokens.
	DefaultKVCapacityTokens = 16384
	// DefaultHiddenLoadTokens is the default number of KV tokens each hidden
	// sequence holds.
	DefaultHiddenLoadTokens = 1024
	// DefaultEmbeddingDim is the default length of an embedding vector.
	DefaultEmbeddingDim = 16
	// DefaultTTFTBase is the default prefill time of a request alone.
	DefaultTTFTBase = 50 * time.Millisecond
	// DefaultTTFTPerSeq is the default prefill time added per running
	// sequence.
	DefaultTTFTPerSeq = 5 * time.Millisecond
	// DefaultITLBase is the default inter-token latency of a request alone.
	DefaultITLBase = 10 * time.Millisecond
	// DefaultITLPerSeq is the default inter-token latency added per running
	// sequence.
	DefaultITLPerSeq = 1 * time.Millisecond
)

// Flavor names the metrics dialect /metrics exposes.
type Flavor string

// The metrics flavors.
const (
	// FlavorVLLM exposes vllm:* series with a model_name label.
	FlavorVLLM Flavor = "vllm"
	// FlavorSGLang exposes sglang:* series with a model_name label.
	FlavorSGLang Flavor = "sglang"
	// FlavorLlamaCPP exposes llamacpp:* series without labels.
	FlavorLlamaCPP Flavor = "llamacpp"
	// FlavorTGI exposes tgi_* series without labels; TGI reports no KV cache
	// usage.
	FlavorTGI Flavor = "tgi"
	// FlavorTRTLLMServe exposes trtllm-serve's trtllm_* series with a
	// model_name label.
	FlavorTRTLLMServe Flavor = "trtllm-serve"
	// FlavorTritonTRTLLM exposes the Triton TensorRT-LLM backend's
	// nv_trt_llm_* families with a model label, each pressure signal one
	// sample selected by request_type or kv_cache_block_type.
	FlavorTritonTRTLLM Flavor = "triton-tensorrt-llm"
)

// Flavors returns every flavor, sorted by name. The slice is new and owned
// by the caller.
func Flavors() []Flavor {
	return slices.Sorted(maps.Keys(flavors))
}

// String returns the flavor's name.
func (f Flavor) String() string { return string(f) }

// Set parses a flavor name; it implements flag.Value.
func (f *Flavor) Set(s string) error {
	if !Flavor(s).valid() {
		return fmt.Errorf("%w: %q", ErrUnknownFlavor, s)
	}
	*f = Flavor(s)
	return nil
}

// valid reports whether f is one of the flavors.
func (f Flavor) valid() bool {
	_, ok := flavors[f]
	return ok
}

// StallPoint says where in a response a configured stall happens.
type StallPoint string

// The stall points.
const (
	// StallBeforeHeaders stalls an inference request before it is queued and
	// before any response header is written; it holds no slot while stalled.
	StallBeforeHeaders StallPoint = "before-headers"
	// StallAfterFirstChunk stalls a streaming response after its first
	// token's SSE chunk is flushed, and a non-streaming response after its
	// headers are flushed (before it is queued). A streaming request holds
	// its slot while stalled.
	StallAfterFirstChunk StallPoint = "after-first-chunk"
)

// String returns the stall point's name.
func (p StallPoint) String() string { return string(p) }

// Set parses a stall point name; it implements flag.Value.
func (p *StallPoint) Set(s string) error {
	switch v := StallPoint(s); v {
	case StallBeforeHeaders, StallAfterFirstChunk:
		*p = v
		return nil
	default:
		return fmt.Errorf("%w: %q", ErrUnknownStallPoint, s)
	}
}

// stallForever is the flag spelling of Stall{Forever: true}.
const stallForever = "forever"

// Stall is an injected pause of every inference request. The zero value
// disables it.
type Stall struct {
	// Duration is how long to pause; zero means no pause unless Forever.
	Duration time.Duration
	// Forever pauses until the client goes away; the request then ends
	// without writing anything more.
	Forever bool
}

// Enabled reports whether the stall pauses at all.
func (s Stall) Enabled() bool { return s.Forever || s.Duration > 0 }

// String returns the flag spelling: "forever" or a duration.
func (s Stall) String() string {
	if s.Forever {
		return stallForever
	}
	return s.Duration.String()
}

// Set parses "forever" or a non-negative duration; it implements flag.Value.
func (s *Stall) Set(v string) error {
	if v == stallForever {
		*s = Stall{Forever: true}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%w: %q is neither %q nor a non-negative duration", ErrInvalidStall, v, stallForever)
	}
	*s = Stall{Duration: d}
	return nil
}

// Config is the simulated engine. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Model is the one served model id; requests naming another model get a
	// 404 OpenAI error. Required, at most MaxModelNameLen bytes.
	Model string
	// Aliases are further model names the engine accepts and lists in
	// /v1/models after Model, like vLLM's extra --served-model-name values.
	// Responses and metrics always name Model. At most MaxAliases names,
	// each 1..MaxModelNameLen bytes, unique and different from Model.
	Aliases []string
	// Flavor selects the /metrics dialect. Required.
	Flavor Flavor
	// MaxNumSeqs is the number of running slots (vLLM's --max-num-seqs),
	// hidden load included. 1..MaxNumSeqsLimit.
	MaxNumSeqs int
	// OutputTokens is the number of tokens generated when a request gives no
	// max_tokens, max_completion_tokens or max_output_tokens.
	// 1..MaxOutputTokensLimit.
	OutputTokens int
	// TTFTBase and TTFTPerSeq give the prefill delay after a request gets a
	// slot: TTFTBase + TTFTPerSeq × running. 0..MaxSimDuration each.
	TTFTBase, TTFTPerSeq time.Duration
	// ITLBase and ITLPerSeq give the delay before each token after the first:
	// ITLBase + ITLPerSeq × running. 0..MaxSimDuration each.
	ITLBase, ITLPerSeq time.Duration
	// KVCapacityTokens is the KV cache size; usage is the tokens in flight
	// divided by it, capped at 1. 1..MaxKVCapacityTokens.
	KVCapacityTokens int
	// HiddenLoad is the number of slots held permanently by synthetic
	// external sequences: they count as running and in KV usage, and slow
	// every request down, but never appear as in-flight requests.
	// 0..MaxNumSeqs-1.
	HiddenLoad int
	// HiddenLoadTokens is the number of KV tokens each hidden sequence holds.
	// 0..MaxHiddenLoadTokens.
	HiddenLoadTokens int
	// EmbeddingDim is the length of each embedding vector.
	// 1..MaxEmbeddingDim.
	EmbeddingDim int
	// ErrorRate is the fraction of inference requests answered with a 500
	// OpenAI error. 0..1; zero disables it.
	ErrorRate float64
	// Seed makes the error decisions reproducible: with the same seed the
	// n-th inference request gets the same decision.
	Seed uint64
	// Stall pauses every inference request at StallAt. The zero value
	// disables it.
	Stall Stall
	// StallAt is where Stall happens. Required.
	StallAt StallPoint
	// MalformedSSE makes every stream emit one data line that is not valid
	// JSON halfway through, then continue normally.
	MalformedSSE bool
	// TruncateSSE makes every stream stop halfway through without its
	// terminal event and abort the connection.
	TruncateSSE bool
	// MetricsDelay delays every /metrics response. 0..MaxSimDuration.
	MetricsDelay time.Duration
	// MetricsFail answers /metrics with a 500.
	MetricsFail bool
	// MetricsOversize pads /metrics beyond 1 MiB with valid series.
	MetricsOversize bool
	// AllowFaultHeader lets each generation request choose a fault with
	// FaultHeader. Off, the header is ignored: a test peer must not be
	// faultable by whoever can reach it unless asked.
	AllowFaultHeader bool
}

// DefaultConfig returns the configuration the enginesim binary starts from.
func DefaultConfig() Config {
	return Config{
		Model:            DefaultModel,
		Flavor:           FlavorVLLM,
		MaxNumSeqs:       DefaultMaxNumSeqs,
		OutputTokens:     DefaultOutputTokens,
		TTFTBase:         DefaultTTFTBase,
		TTFTPerSeq:       DefaultTTFTPerSeq,
		ITLBase:          DefaultITLBase,
		ITLPerSeq:        DefaultITLPerSeq,
		KVCapacityTokens: DefaultKVCapacityTokens,
		HiddenLoadTokens: DefaultHiddenLoadTokens,
		EmbeddingDim:     DefaultEmbeddingDim,
		StallAt:          StallBeforeHeaders,
	}
}

// RegisterFlags binds every Config field to a flag of fs, using the current
// values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "served model id; requests naming another model get 404")
	fs.Func("aliases", "comma-separated further model names the engine accepts", func(v string) error {
		c.Aliases = nil
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				c.Aliases = append(c.Aliases, name)
			}
		}
		return nil
	})
	fs.Var(&c.Flavor, "flavor", "metrics dialect, one of "+fmt.Sprint(Flavors()))
	fs.IntVar(&c.MaxNumSeqs, "max-num-seqs", c.MaxNumSeqs, "running slots, hidden load included")
	fs.IntVar(&c.OutputTokens, "output-tokens", c.OutputTokens, "tokens generated when a request names no limit")
	fs.DurationVar(&c.TTFTBase, "ttft-base", c.TTFTBase, "prefill delay of a request alone")
	fs.DurationVar(&c.TTFTPerSeq, "ttft-per-seq", c.TTFTPerSeq, "prefill delay added per running sequence")
	fs.DurationVar(&c.ITLBase, "itl-base", c.ITLBase, "inter-token latency of a request alone")
	fs.DurationVar(&c.ITLPerSeq, "itl-per-seq", c.ITLPerSeq, "inter-token latency added per running sequence")
	fs.IntVar(&c.KVCapacityTokens, "kv-capacity-tokens", c.KVCapacityTokens, "KV cache size in tokens")
	fs.IntVar(&c.HiddenLoad, "hidden-load", c.HiddenLoad, "slots held permanently by synthetic external sequences")
	fs.IntVar(&c.HiddenLoadTokens, "hidden-load-tokens", c.HiddenLoadTokens, "KV tokens held by each hidden sequence")
	fs.IntVar(&c.EmbeddingDim, "embedding-dim", c.EmbeddingDim, "length of each embedding vector")
	fs.Float64Var(&c.ErrorRate, "error-rate", c.ErrorRate, "fraction of inference requests answered with a 500 error (0..1)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the error-rate decisions")
	fs.Var(&c.Stall, "stall", `pause of every inference request: a duration or "forever" (until the client goes away)`)
	fs.Var(&c.StallAt, "stall-at", "where --stall pauses: before-headers or after-first-chunk")
	fs.BoolVar(&c.MalformedSSE, "malformed-sse", c.MalformedSSE, "emit one invalid SSE data line halfway through every stream")
	fs.BoolVar(&c.TruncateSSE, "truncate-sse", c.TruncateSSE, "abort every stream halfway through without its terminal event")
	fs.DurationVar(&c.MetricsDelay, "metrics-delay", c.MetricsDelay, "delay of every /metrics response")
	fs.BoolVar(&c.MetricsFail, "metrics-fail", c.MetricsFail, "answer /metrics with 500")
	fs.BoolVar(&c.MetricsOversize, "metrics-oversize", c.MetricsOversize, "pad /metrics beyond 1 MiB")
	fs.BoolVar(&c.AllowFaultHeader, "allow-fault-header", c.AllowFaultHeader,
		"let each generation request choose a fault with the "+FaultHeader+" header")
}

// Validate reports the first field outside its documented bounds, wrapped in
// ErrInvalidConfig.
func (c Config) Validate() error {
	invalid := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Model == "" || len(c.Model) > MaxModelNameLen:
		return invalid("model", "must be 1..%d bytes", MaxModelNameLen)
	case len(c.Aliases) > MaxAliases:
		return invalid("aliases", "must be at most %d names", MaxAliases)
	case c.MaxNumSeqs < 1 || c.MaxNumSeqs > MaxNumSeqsLimit:
		return invalid("max-num-seqs", "must be 1..%d", MaxNumSeqsLimit)
	case c.OutputTokens < 1 || c.OutputTokens > MaxOutputTokensLimit:
		return invalid("output-tokens", "must be 1..%d", MaxOutputTokensLimit)
	case c.KVCapacityTokens < 1 || c.KVCapacityTokens > MaxKVCapacityTokens:
		return invalid("kv-capacity-tokens", "must be 1..%d", MaxKVCapacityTokens)
	case c.HiddenLoad < 0 || c.HiddenLoad >= c.MaxNumSeqs:
		return invalid("hidden-load", "must be 0..max-num-seqs-1 (%d)", c.MaxNumSeqs-1)
	case c.HiddenLoadTokens < 0 || c.HiddenLoadTokens > MaxHiddenLoadTokens:
		return invalid("hidden-load-tokens", "must be 0..%d", MaxHiddenLoadTokens)
	case c.EmbeddingDim < 1 || c.EmbeddingDim > MaxEmbeddingDim:
		return invalid("embedding-dim", "must be 1..%d", MaxEmbeddingDim)
	case math.IsNaN(c.ErrorRate) || c.ErrorRate < 0 || c.ErrorRate > 1:
		return invalid("error-rate", "must be 0..1")
	}
	for i, a := range c.Aliases {
		if a == "" || len(a) > MaxModelNameLen || a == c.Model || slices.Contains(c.Aliases[:i], a) {
			return invalid("aliases", "must be unique names of 1..%d bytes other than the model", MaxModelNameLen)
		}
	}
	if !c.Flavor.valid() {
		return fmt.Errorf("%w: flavor: %w", ErrInvalidConfig, ErrUnknownFlavor)
	}
	if c.StallAt != StallBeforeHeaders && c.StallAt != StallAfterFirstChunk {
		return fmt.Errorf("%w: stall-at: %w", ErrInvalidConfig, ErrUnknownStallPoint)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ttft-base", c.TTFTBase}, {"ttft-per-seq", c.TTFTPerSeq},
		{"itl-base", c.ITLBase}, {"itl-per-seq", c.ITLPerSeq},
		{"stall", c.Stall.Duration}, {"metrics-delay", c.MetricsDelay},
	} {
		if d.v < 0 || d.v > MaxSimDuration {
			return invalid(d.name, "must be 0..%s", MaxSimDuration)
		}
	}
	return nil
}

// Latency returns the simulated prefill delay and inter-token latency when
// running sequences (hidden load included, the request itself included)
// occupy slots: ttft = TTFTBase + TTFTPerSeq × running and itl = ITLBase +
// ITLPerSeq × running.
func (c Config) Latency(running int) (ttft, itl time.Duration) {
	n := time.Duration(running)
	return c.TTFTBase + c.TTFTPerSeq*n, c.ITLBase + c.ITLPerSeq*n
}
