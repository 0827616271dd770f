package pressure

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// Engine names the metrics dialect of an inference engine. It is the value of
// a member's metrics.engine field; the series names behind it never leave this
// package.
type Engine string

// The closed set of engines with an adapter. The names are those of the
// Gateway API Inference Extension's model server protocol where it lists
// the engine (docs/PRESSURE.md#engine-adapters).
const (
	// EngineVLLM reads vLLM's vllm:* series.
	EngineVLLM Engine = "vllm"
	// EngineSGLang reads SGLang's sglang:* series.
	EngineSGLang Engine = "sglang"
	// EngineLlamaCPP reads the llama.cpp server's llamacpp:* series.
	EngineLlamaCPP Engine = "llamacpp"
	// EngineTGI reads Text Generation Inference's tgi_* series. TGI reports
	// no KV cache usage, so its KV signal is always missing.
	EngineTGI Engine = "tgi"
	// EngineTRTLLMServe reads TensorRT-LLM's trtllm-serve trtllm_* series.
	EngineTRTLLMServe Engine = "trtllm-serve"
	// EngineTritonTRTLLM reads the Triton TensorRT-LLM backend's
	// nv_trt_llm_* series, selected by their request_type and
	// kv_cache_block_type labels.
	EngineTritonTRTLLM Engine = "triton-tensorrt-llm"
)

// dialect lists, per signal, the selectors an engine's series may match. A
// signal with several selectors (vLLM renamed its KV series) reads all of
// them.
type dialect struct {
	running []selector
	waiting []selector
	kv      []selector
}

var dialects = map[Engine]dialect{
	EngineVLLM: {
		running: selectors("vllm:num_requests_running"),
		waiting: selectors("vllm:num_requests_waiting"),
		kv:      selectors("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
	},
	EngineSGLang: {
		running: selectors("sglang:num_running_reqs"),
		waiting: selectors("sglang:num_queue_reqs"),
		kv:      selectors("sglang:token_usage"),
	},
	EngineLlamaCPP: {
		running: selectors("llamacpp:requests_processing"),
		waiting: selectors("llamacpp:requests_deferred"),
		kv:      selectors("llamacpp:kv_cache_usage_ratio"),
	},
	EngineTGI: {
		running: selectors("tgi_batch_current_size"),
		waiting: selectors("tgi_queue_size"),
	},
	EngineTRTLLMServe: {
		running: selectors("trtllm_num_requests_running"),
		waiting: selectors("trtllm_num_requests_waiting"),
		kv:      selectors("trtllm_kv_cache_utilization"),
	},
	EngineTritonTRTLLM: {
		running: selectors(`nv_trt_llm_request_metrics{request_type="scheduled"}`),
		waiting: selectors(`nv_trt_llm_request_metrics{request_type="waiting"}`),
		kv:      selectors(`nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}`),
	},
}

// selectors parses the adapter table's selectors; a malformed one is a
// programming error, caught when the package loads.
func selectors(texts ...string) []selector {
	out := make([]selector, 0, len(texts))
	for _, text := range texts {
		sel, err := parseSelector(text)
		if err != nil {
			panic("pressure: adapter table selector " + text + ": " + err.Error())
		}
		out = append(out, sel)
	}
	return out
}

// Series names a member's own pressure series (metrics.series): per
// signal, a selector of bounds.SeriesSelectorPattern that replaces the
// engine's series for that signal. An empty selector leaves the signal to
// the engine's series, or, for a member without an engine, unread
// (missing). It lets an engine in no adapter table be read.
type Series struct {
	// Running selects the requests running (in the batch).
	Running string
	// Waiting selects the requests waiting for a batch slot.
	Waiting string
	// KVUsage selects the KV cache usage, a fraction 0..1.
	KVUsage string
}

// IsZero reports whether s names no series.
func (s Series) IsZero() bool { return s == Series{} }

// Engines returns the engines with an adapter, sorted by name: the closed
// set of metrics dialects, defined once by the adapter table. The API's
// Engine enum and Validate, and enginesim's flavors, are tested against
// it. The slice is new and owned by the caller.
func Engines() []Engine {
	return slices.Sorted(maps.Keys(dialects))
}

// ParseEngine returns the Engine named name, or ErrUnknownEngine. Config
// validation calls it so that an unknown engine is rejected before any scrape.
func ParseEngine(name string) (Engine, error) {
	e := Engine(name)
	if _, ok := dialects[e]; !ok {
		return "", ErrUnknownEngine
	}
	return e, nil
}

// ValidEngine reports whether name is an engine with an adapter.
func ValidEngine(name string) bool {
	_, err := ParseEngine(name)
	return err == nil
}

// dialectOf returns the series a member reads: its engine's, each signal
// replaced by the member's named series when it names one. An empty engine
// reads only the named series; with neither there is nothing to read.
//
// Errors: ErrUnknownEngine (an unknown engine, or neither an engine nor a
// series) and ErrInvalidSeries.
func dialectOf(engine Engine, series Series) (dialect, error) {
	var d dialect
	if engine != "" || series.IsZero() {
		var ok bool
		if d, ok = dialects[engine]; !ok {
			return dialect{}, ErrUnknownEngine
		}
	}
	for _, named := range []struct {
		text   string
		signal *[]selector
	}{{series.Running, &d.running}, {series.Waiting, &d.waiting}, {series.KVUsage, &d.kv}} {
		if named.text == "" {
			continue
		}
		sel, err := parseSelector(named.text)
		if err != nil {
			return dialect{}, err
		}
		*named.signal = []selector{sel}
	}
	return d, nil
}

// Parse reads one Prometheus text exposition and maps a member's series
// (its engine's, or those it names; see Series) to a Telemetry. Counts
// (running, waiting) are summed across every sample a signal's selectors
// pick, whatever their other labels; KV usage is the maximum across them. A
// signal whose selectors pick no sample is nil.
//
// Parse does not judge bounds; scheduler.Normalize does. It only refuses to
// let aggregation hide a malformed value: a count sample that is not a
// finite, non-negative integer, a KV sample that is not finite and
// non-negative, or a picked sample of histogram or summary type makes that
// signal carry the offending value (NaN for a non-scalar type), which
// Normalize classifies as invalid.
//
// Errors: ErrUnknownEngine, ErrInvalidSeries, ErrParse (invalid exposition)
// and ErrMissingSeries (none of the member's pressure series present).
func Parse(engine Engine, series Series, r io.Reader) (scheduler.Telemetry, error) {
	d, err := dialectOf(engine, series)
	if err != nil {
		return scheduler.Telemetry{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return scheduler.Telemetry{}, parseError(err)
	}
	t := scheduler.Telemetry{
		Running: aggregate(families, d.running, sumCounts),
		Waiting: aggregate(families, d.waiting, sumCounts),
		KVUsage: aggregate(families, d.kv, maxFraction),
	}
	if t.Running == nil && t.Waiting == nil && t.KVUsage == nil {
		return scheduler.Telemetry{}, ErrMissingSeries
	}
	return t, nil
}

// parseError wraps a parser failure without its message, which may quote the
// exposition; only the line number is kept.
func parseError(err error) error {
	var pe expfmt.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w: line %d", ErrParse, pe.Line)
	}
	return ErrParse
}

// fold combines one series value into an accumulator. It returns the new
// accumulator and whether v was malformed; a malformed value becomes the
// signal's final value.
type fold func(acc, v float64) (float64, bool)

// sumCounts adds a request count. Counts must be finite non-negative
// integers; a fractional count is malformed because a sum of fractions could
// look integral.
func sumCounts(acc, v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v != math.Trunc(v) {
		return v, true
	}
	return acc + v, false
}

// maxFraction keeps the largest KV usage. Values above 1 survive the max and
// are left to Normalize; negative values would not, so they are malformed.
func maxFraction(acc, v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return v, true
	}
	return math.Max(acc, v), false
}

// aggregate folds every sample the selectors pick. It returns nil when they
// pick none.
func aggregate(families map[string]*dto.MetricFamily, sels []selector, f fold) *float64 {
	var (
		acc  float64
		seen bool
	)
	for _, sel := range sels {
		mf, ok := families[sel.name]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !sel.matches(m.GetLabel()) {
				continue
			}
			v, ok := scalar(mf.GetType(), m)
			if !ok {
				v = math.NaN()
				return &v
			}
			next, bad := f(acc, v)
			if bad {
				return &next
			}
			acc, seen = next, true
		}
	}
	if !seen {
		return nil
	}
	return &acc
}

// scalar returns the value of a gauge, counter or untyped sample, and false
// for any other metric type.
func scalar(t dto.MetricType, m *dto.Metric) (float64, bool) {
	switch t {
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), m.GetGauge() != nil
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), m.GetCounter() != nil
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), m.GetUntyped() != nil
	default:
		return 0, false
	}
}
