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

// The closed set of engines with an adapter.
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
)

// dialect lists, per signal, the metric names an engine may use for it. A
// signal with several names (vLLM renamed its KV series) reads all of them.
type dialect struct {
	running []string
	waiting []string
	kv      []string
}

var dialects = map[Engine]dialect{
	EngineVLLM: {
		running: []string{"vllm:num_requests_running"},
		waiting: []string{"vllm:num_requests_waiting"},
		kv:      []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
	},
	EngineSGLang: {
		running: []string{"sglang:num_running_reqs"},
		waiting: []string{"sglang:num_queue_reqs"},
		kv:      []string{"sglang:token_usage"},
	},
	EngineLlamaCPP: {
		running: []string{"llamacpp:requests_processing"},
		waiting: []string{"llamacpp:requests_deferred"},
		kv:      []string{"llamacpp:kv_cache_usage_ratio"},
	},
	EngineTGI: {
		running: []string{"tgi_batch_current_size"},
		waiting: []string{"tgi_queue_size"},
	},
}

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

// Parse reads one Prometheus text exposition and maps engine's series to a
// Telemetry. Counts (running, waiting) are summed across all series of a
// metric, whatever their labels; KV usage is the maximum across series. A
// signal whose series are all absent is nil.
//
// Parse does not judge bounds; scheduler.Normalize does. It only refuses to
// let aggregation hide a malformed value: a count series that is not a
// finite, non-negative integer, a KV series that is not finite and
// non-negative, or a pressure series of histogram or summary type makes that
// signal carry the offending value (NaN for a non-scalar type), which
// Normalize classifies as invalid.
//
// Errors: ErrUnknownEngine, ErrParse (invalid exposition) and
// ErrMissingSeries (none of the engine's pressure series present).
func Parse(engine Engine, r io.Reader) (scheduler.Telemetry, error) {
	d, ok := dialects[engine]
	if !ok {
		return scheduler.Telemetry{}, ErrUnknownEngine
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

// aggregate folds every series of the named metrics. It returns nil when none
// of the names is present.
func aggregate(families map[string]*dto.MetricFamily, names []string, f fold) *float64 {
	var (
		acc  float64
		seen bool
	)
	for _, name := range names {
		mf, ok := families[name]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
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
