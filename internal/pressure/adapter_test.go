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
			name: "a NaN series poisons its signal", engine: EngineVLLM, fixture: "vllm_nan.txt",
			want: scheduler.Telemetry{Running: f64(math.NaN()), Waiting: f64(0), KVUsage: f64(0.2)},
		},
		{name: "another engine's exposition", engine: EngineVLLM, fixture: "tgi.txt", wantErr: ErrMissingSeries},
		{name: "no engine series at all", engine: EngineSGLang, fixture: "unrelated.txt", wantErr: ErrMissingSeries},
		{name: "malformed exposition", engine: EngineVLLM, fixture: "malformed.txt", wantErr: ErrParse},
		{name: "unknown engine", engine: "triton", fixture: "vllm.txt", wantErr: ErrUnknownEngine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.engine, strings.NewReader(string(readFixture(t, tc.fixture))))
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
			got, err := Parse(EngineVLLM, strings.NewReader(tc.text))
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
		// The NaN running series makes the whole sample unknown.
		{EngineVLLM, "vllm_nan.txt", scheduler.Pressure{Freshness: scheduler.FreshnessUnknown,
			RequestState: scheduler.SignalInvalid, KVState: scheduler.SignalValid}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			tel, err := Parse(tc.engine, strings.NewReader(string(readFixture(t, tc.fixture))))
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
	_, err := Parse(EngineVLLM, strings.NewReader("secret_token{a=\"hunter2\" 1\n"))
	if !errors.Is(err, ErrParse) {
		t.Fatalf("error = %v, want ErrParse", err)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret_token") {
		t.Fatalf("error %q quotes the exposition", err)
	}
}

func TestParseEngine(t *testing.T) {
	for _, name := range []string{"vllm", "sglang", "llamacpp", "tgi"} {
		if e, err := ParseEngine(name); err != nil || string(e) != name || !ValidEngine(name) {
			t.Errorf("ParseEngine(%q) = %q, %v", name, e, err)
		}
	}
	for _, name := range []string{"", "VLLM", "triton", "vllm "} {
		if _, err := ParseEngine(name); !errors.Is(err, ErrUnknownEngine) || ValidEngine(name) {
			t.Errorf("ParseEngine(%q) error = %v, want ErrUnknownEngine", name, err)
		}
	}
}
