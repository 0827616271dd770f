package pressure

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

func f64(v float64) *float64 { return &v }

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(os.DirFS("testdata"), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameValue compares two optional signals; NaN equals NaN.
func sameValue(a, b *float64) bool {
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	case math.IsNaN(*a) || math.IsNaN(*b):
		return math.IsNaN(*a) && math.IsNaN(*b)
	}
	return *a == *b
}

func show(v *float64) string {
	if v == nil {
		return "nil"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		name    string
		engine  Engine
		fixture string
		want    scheduler.Telemetry
		wantErr error
	}{
		{
			name: "vllm v1 sums two data-parallel engines and takes the larger KV", engine: EngineVLLM, fixture: "vllm.txt",
			want: scheduler.Telemetry{Running: f64(12), Waiting: f64(2), KVUsage: f64(0.4375)},
		},
		{
			name: "vllm v0 reads the older gpu_cache_usage_perc", engine: EngineVLLM, fixture: "vllm_v0.txt",
			want: scheduler.Telemetry{Running: f64(4), Waiting: f64(3), KVUsage: f64(0.8125)},
		},
		{
			name: "sglang sums dp ranks", engine: EngineSGLang, fixture: "sglang.txt",
			want: scheduler.Telemetry{Running: f64(20), Waiting: f64(5), KVUsage: f64(0.61)},
		},
		{
			name: "llama.cpp unlabelled series", engine: EngineLlamaCPP, fixture: "llamacpp.txt",
			want: scheduler.Telemetry{Running: f64(3), Waiting: f64(0), KVUsage: f64(0.5)},
		},
		{
			name: "tgi has no KV series", engine: EngineTGI, fixture: "tgi.txt",
			want: scheduler.Telemetry{Running: f64(24), Waiting: f64(6)},
		},
		{
			name: "trtllm-serve", engine: EngineTRTLLMServe, fixture: "trtllm_serve.txt",
			want: scheduler.Telemetry{Running: f64(6), Waiting: f64(2), KVUsage: f64(0.375)},
		},
		{
			name:   "triton selects scheduled, waiting and fraction among the samples of its two families",
			engine: EngineTritonTRTLLM, fixture: "triton_trtllm.txt",
			want: scheduler.Telemetry{Running: f64(3), Waiting: f64(4), KVUsage: f64(0.25)},
		},
		{
			name: "a NaN series poisons its signal", engine: EngineVLLM, fixture: "vllm_nan.txt",
			want: scheduler.Telemetry{Running: f64(math.NaN()), Waiting: f64(0), KVUsage: f64(0.2)},
		},
		{name: "another engine's exposition", engine: EngineVLLM, fixture: "tgi.txt", wantErr: ErrMissingSeries},
		{name: "no engine series at all", engine: EngineSGLang, fixture: "unrelated.txt", wantErr: ErrMissingSeries},
		{name: "trtllm-serve reading triton", engine: EngineTRTLLMServe, fixture: "triton_trtllm.txt", wantErr: ErrMissingSeries},
		{name: "triton reading trtllm-serve", engine: EngineTritonTRTLLM, fixture: "trtllm_serve.txt", wantErr: ErrMissingSeries},
		{name: "malformed exposition", engine: EngineVLLM, fixture: "malformed.txt", wantErr: ErrParse},
		{name: "unknown engine", engine: "triton", fixture: "vllm.txt", wantErr: ErrUnknownEngine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.engine, Series{}, strings.NewReader(string(readFixture(t, tc.fixture))))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !sameValue(got.Running, tc.want.Running) || !sameValue(got.Waiting, tc.want.Waiting) ||
				!sameValue(got.KVUsage, tc.want.KVUsage) {
				t.Fatalf("telemetry = {%s %s %s}, want {%s %s %s}",
					show(got.Running), show(got.Waiting), show(got.KVUsage),
					show(tc.want.Running), show(tc.want.Waiting), show(tc.want.KVUsage))
			}
		})
	}
}

func TestParseAggregation(t *testing.T) {
	const (
		gauge = "# TYPE vllm:num_requests_running gauge\n"
		wait0 = "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
	)
	tests := []struct {
		name string
		text string
		want scheduler.Telemetry
	}{
		{
			name: "untyped series without HELP or TYPE are read",
			text: "vllm:num_requests_running{model_name=\"a\"} 1\nvllm:num_requests_running{model_name=\"b\"} 2\nvllm:num_requests_waiting 4\n",
			want: scheduler.Telemetry{Running: f64(3), Waiting: f64(4)},
		},
		{
			name: "a negative count poisons the signal instead of lowering the sum",
			text: gauge + "vllm:num_requests_running{engine=\"0\"} 5\nvllm:num_requests_running{engine=\"1\"} -1\n" + wait0,
			want: scheduler.Telemetry{Running: f64(-1), Waiting: f64(0)},
		},
		{
			name: "fractional counts poison the signal even when their sum is integral",
			text: gauge + "vllm:num_requests_running{engine=\"0\"} 0.5\nvllm:num_requests_running{engine=\"1\"} 0.5\n" + wait0,
			want: scheduler.Telemetry{Running: f64(0.5), Waiting: f64(0)},
		},
		{
			name: "+Inf count",
			text: gauge + "vllm:num_requests_running +Inf\n" + wait0,
			want: scheduler.Telemetry{Running: f64(math.Inf(1)), Waiting: f64(0)},
		},
		{
			name: "a negative KV value poisons the signal instead of losing the max",
			text: "vllm:kv_cache_usage_perc{engine=\"0\"} 0.3\nvllm:kv_cache_usage_perc{engine=\"1\"} -0.5\n",
			want: scheduler.Telemetry{KVUsage: f64(-0.5)},
		},
		{
			name: "-Inf KV",
			text: "vllm:kv_cache_usage_perc -Inf\n",
			want: scheduler.Telemetry{KVUsage: f64(math.Inf(-1))},
		},
		{
			name: "KV above one survives the max for Normalize to reject",
			text: "vllm:kv_cache_usage_perc{engine=\"0\"} 1.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n",
			want: scheduler.Telemetry{KVUsage: f64(1.5)},
		},
		{
			name: "both vLLM KV names are read and the max wins",
			text: "vllm:gpu_cache_usage_perc 0.7\nvllm:kv_cache_usage_perc 0.2\n",
			want: scheduler.Telemetry{KVUsage: f64(0.7)},
		},
		{
			name: "a pressure series of histogram type is malformed",
			text: "# TYPE vllm:num_requests_running histogram\nvllm:num_requests_running_bucket{le=\"+Inf\"} 1\nvllm:num_requests_running_sum 1\nvllm:num_requests_running_count 1\n" + wait0,
			want: scheduler.Telemetry{Running: f64(math.NaN()), Waiting: f64(0)},
		},
		{
			name: "counter typed series are read",
			text: "# TYPE vllm:num_requests_running counter\nvllm:num_requests_running 2\n" + wait0,
			want: scheduler.Telemetry{Running: f64(2), Waiting: f64(0)},
		},
		{
			name: "timestamps are accepted",
			text: "vllm:num_requests_running 2 1712345678000\n" + wait0,
			want: scheduler.Telemetry{Running: f64(2), Waiting: f64(0)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(EngineVLLM, Series{}, strings.NewReader(tc.text))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !sameValue(got.Running, tc.want.Running) || !sameValue(got.Waiting, tc.want.Waiting) ||
				!sameValue(got.KVUsage, tc.want.KVUsage) {
				t.Fatalf("telemetry = {%s %s %s}, want {%s %s %s}",
					show(got.Running), show(got.Waiting), show(got.KVUsage),
					show(tc.want.Running), show(tc.want.Waiting), show(tc.want.KVUsage))
			}
		})
	}
}

// TestParseNamedSeries reads expositions through a member's named series,
// with and without an engine.
func TestParseNamedSeries(t *testing.T) {
	custom := Series{
		Running: `srv_requests{state="running"}`,
		Waiting: `srv_requests{state="queued"}`,
		KVUsage: "srv_kv_cache_usage_ratio",
	}
	tests := []struct {
		name    string
		engine  Engine
		series  Series
		fixture string
		want    scheduler.Telemetry
		wantErr error
	}{
		{
			name: "a custom server: counts of both models summed, the fuller KV cache", series: custom, fixture: "custom.txt",
			want: scheduler.Telemetry{Running: f64(7), Waiting: f64(8), KVUsage: f64(0.5)},
		},
		{
			name: "one model of a custom server, matchers in any order", fixture: "custom.txt",
			series: Series{
				Running: `srv_requests{model="chat",state="running"}`,
				Waiting: `srv_requests{state="queued",model="chat"}`,
				KVUsage: `srv_kv_cache_usage_ratio{model="code"}`,
			},
			want: scheduler.Telemetry{Running: f64(5), Waiting: f64(1), KVUsage: f64(0.125)},
		},
		{
			name: "a signal named by neither series nor engine is missing", fixture: "custom.txt",
			series: Series{Running: `srv_requests{state="running"}`},
			want:   scheduler.Telemetry{Running: f64(7)},
		},
		{
			name: "a matcher that picks no sample leaves its signal missing", fixture: "custom.txt",
			series: Series{Running: `srv_requests{state="running"}`, Waiting: `srv_requests{state="sleeping"}`},
			want:   scheduler.Telemetry{Running: f64(7)},
		},
		{
			name: "a named series replaces the engine's for its signal only", engine: EngineVLLM, fixture: "vllm.txt",
			series: Series{KVUsage: `vllm:kv_cache_usage_perc{engine="1"}`},
			want:   scheduler.Telemetry{Running: f64(12), Waiting: f64(2), KVUsage: f64(0.3125)},
		},
		{
			name: "triton's context requests instead of its scheduled ones", engine: EngineTritonTRTLLM, fixture: "triton_trtllm.txt",
			series: Series{Running: `nv_trt_llm_request_metrics{request_type="context"}`},
			want:   scheduler.Telemetry{Running: f64(1), Waiting: f64(4), KVUsage: f64(0.25)},
		},
		{name: "no sample picked at all", fixture: "custom.txt", series: Series{Running: `srv_requests{state="sleeping"}`}, wantErr: ErrMissingSeries},
		{name: "an invalid selector", fixture: "custom.txt", series: Series{Running: "srv_requests{state=running}"}, wantErr: ErrInvalidSeries},
		{name: "an invalid selector with an engine", engine: EngineVLLM, fixture: "vllm.txt", series: Series{KVUsage: "a{"}, wantErr: ErrInvalidSeries},
		{name: "an unknown engine with series", engine: "triton", fixture: "custom.txt", series: custom, wantErr: ErrUnknownEngine},
		{name: "neither engine nor series", fixture: "custom.txt", wantErr: ErrUnknownEngine},
		{name: "malformed exposition", fixture: "malformed.txt", series: custom, wantErr: ErrParse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.engine, tc.series, strings.NewReader(string(readFixture(t, tc.fixture))))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !sameValue(got.Running, tc.want.Running) || !sameValue(got.Waiting, tc.want.Waiting) ||
				!sameValue(got.KVUsage, tc.want.KVUsage) {
				t.Fatalf("telemetry = {%s %s %s}, want {%s %s %s}",
					show(got.Running), show(got.Waiting), show(got.KVUsage),
					show(tc.want.Running), show(tc.want.Waiting), show(tc.want.KVUsage))
			}
		})
	}
}

// TestParseSeveralSamples pins what the samples a selector picks become
// when there are several (several models in one Triton, or ranks): counts
// are summed, KV usage is the largest, and one malformed or non-scalar
// sample among them makes the signal invalid.
func TestParseSeveralSamples(t *testing.T) {
	const (
		requests = "# TYPE nv_trt_llm_request_metrics gauge\n"
		kv       = "# TYPE nv_trt_llm_kv_cache_block_metrics gauge\n"
	)
	tests := []struct {
		name string
		text string
		want scheduler.Telemetry
	}{
		{
			name: "two models: scheduled and waiting summed, the larger fraction",
			text: requests +
				"nv_trt_llm_request_metrics{model=\"a\",request_type=\"scheduled\"} 3\n" +
				"nv_trt_llm_request_metrics{model=\"b\",request_type=\"scheduled\"} 4\n" +
				"nv_trt_llm_request_metrics{model=\"a\",request_type=\"waiting\"} 1\n" +
				"nv_trt_llm_request_metrics{model=\"b\",request_type=\"waiting\"} 2\n" +
				"nv_trt_llm_request_metrics{model=\"a\",request_type=\"max\"} 512\n" + kv +
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"a\"} 0.5\n" +
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"b\"} 0.75\n" +
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\",model=\"a\"} 6240\n",
			want: scheduler.Telemetry{Running: f64(7), Waiting: f64(3), KVUsage: f64(0.75)},
		},
		{
			name: "a fractional sample among the picked ones poisons its signal, an unpicked one does not",
			text: requests +
				"nv_trt_llm_request_metrics{model=\"a\",request_type=\"scheduled\"} 3\n" +
				"nv_trt_llm_request_metrics{model=\"b\",request_type=\"scheduled\"} 0.5\n" +
				"nv_trt_llm_request_metrics{model=\"a\",request_type=\"waiting\"} 1\n" +
				"nv_trt_llm_request_metrics{model=\"a\",request_type=\"fraction_of_max\"} 0.25\n",
			want: scheduler.Telemetry{Running: f64(0.5), Waiting: f64(1)},
		},
		{
			name: "a KV fraction above one survives the max for Normalize to reject",
			text: kv + "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"a\"} 1.25\n" +
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"b\"} 0.25\n",
			want: scheduler.Telemetry{KVUsage: f64(1.25)},
		},
		{
			name: "a picked family of histogram type is malformed",
			text: "# TYPE nv_trt_llm_request_metrics histogram\n" +
				"nv_trt_llm_request_metrics_bucket{request_type=\"scheduled\",le=\"+Inf\"} 1\n" +
				"nv_trt_llm_request_metrics_count{request_type=\"scheduled\"} 1\n" +
				"nv_trt_llm_request_metrics_sum{request_type=\"scheduled\"} 1\n",
			want: scheduler.Telemetry{Running: f64(math.NaN())},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(EngineTritonTRTLLM, Series{}, strings.NewReader(tc.text))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !sameValue(got.Running, tc.want.Running) || !sameValue(got.Waiting, tc.want.Waiting) ||
				!sameValue(got.KVUsage, tc.want.KVUsage) {
				t.Fatalf("telemetry = {%s %s %s}, want {%s %s %s}",
					show(got.Running), show(got.Waiting), show(got.KVUsage),
					show(tc.want.Running), show(tc.want.Waiting), show(tc.want.KVUsage))
			}
		})
	}
}

// TestParseNormalize pins what the cache retains for each fixture: the
// adapter's telemetry normalized against a member ceiling of 32.
func TestParseNormalize(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		engine  Engine
		fixture string
		want    scheduler.Pressure
	}{
		// (12+2)/32 = 437500 ppm; KV 0.4375 = 437500 ppm.
		{EngineVLLM, "vllm.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 437500,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		// KV 0.8125 beats (4+3)/32.
		{EngineVLLM, "vllm_v0.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 812500,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		// (20+5)/32 = 781250 ppm beats KV 0.61.
		{EngineSGLang, "sglang.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 781250,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		{EngineLlamaCPP, "llamacpp.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 500000,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		// (24+6)/32 = 937500 ppm; no KV series.
		{EngineTGI, "tgi.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 937500,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalMissing}},
		// (6+2)/32 = 250000 ppm; KV 0.375 beats it.
		{EngineTRTLLMServe, "trtllm_serve.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 375000,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		// KV 0.25 = 250000 ppm beats (3+4)/32 = 218750 ppm.
		{EngineTritonTRTLLM, "triton_trtllm.txt", scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 250000,
			RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}},
		// The NaN running series makes the whole sample unknown.
		{EngineVLLM, "vllm_nan.txt", scheduler.Pressure{Freshness: scheduler.FreshnessUnknown,
			RequestState: scheduler.SignalInvalid, KVState: scheduler.SignalValid}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			tel, err := Parse(tc.engine, Series{}, strings.NewReader(string(readFixture(t, tc.fixture))))
			if err != nil {
				t.Fatal(err)
			}
			if got := scheduler.Normalize(now, now, true, 32, tel); got != tc.want {
				t.Fatalf("pressure = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrorDoesNotQuoteTheExposition(t *testing.T) {
	_, err := Parse(EngineVLLM, Series{}, strings.NewReader("secret_token{a=\"hunter2\" 1\n"))
	if !errors.Is(err, ErrParse) {
		t.Fatalf("error = %v, want ErrParse", err)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret_token") {
		t.Fatalf("error %q quotes the exposition", err)
	}
}

func TestParseEngine(t *testing.T) {
	for _, name := range []string{"vllm", "sglang", "llamacpp", "tgi", "trtllm-serve", "triton-tensorrt-llm"} {
		if e, err := ParseEngine(name); err != nil || string(e) != name || !ValidEngine(name) {
			t.Errorf("ParseEngine(%q) = %q, %v", name, e, err)
		}
	}
	for _, name := range []string{"", "VLLM", "triton", "vllm ", "trtllm"} {
		if _, err := ParseEngine(name); !errors.Is(err, ErrUnknownEngine) || ValidEngine(name) {
			t.Errorf("ParseEngine(%q) error = %v, want ErrUnknownEngine", name, err)
		}
	}
}
