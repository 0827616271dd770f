package enginesim

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseMetrics parses a text exposition with the library sluice's pressure
// adapters use.
func parseMetrics(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, body)
	}
	return families
}

// gaugeValue returns the single sample of a gauge family and its labels.
func gaugeValue(t *testing.T, families map[string]*dto.MetricFamily, name string) (float64, map[string]string) {
	t.Helper()
	return gaugeSample(t, families, name, "", "")
}

// gaugeSample returns the one sample of a gauge family whose label key has
// value, or, with an empty key, the family's single sample; and its labels.
func gaugeSample(t *testing.T, families map[string]*dto.MetricFamily, name, key, value string) (float64, map[string]string) {
	t.Helper()
	mf, ok := families[name]
	if !ok {
		t.Fatalf("missing family %s", name)
	}
	if mf.GetType() != dto.MetricType_GAUGE {
		t.Fatalf("%s: type %v, want gauge", name, mf.GetType())
	}
	found := mf.GetMetric()
	if key != "" {
		found = slices.DeleteFunc(slices.Clone(found), func(m *dto.Metric) bool {
			return !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == key && l.GetValue() == value
			})
		})
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d samples with %s=%q among %d, want one", name, len(found), key, value, len(mf.GetMetric()))
	}
	labels := map[string]string{}
	for _, l := range found[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return found[0].GetGauge().GetValue(), labels
}

// pressureSeries names one flavor's series of a signal: its family, and the
// label that selects its sample when the family holds several.
type pressureSeries struct {
	family, key, value string
}

func TestMetricsFlavors(t *testing.T) {
	type want struct {
		running, waiting, kv pressureSeries
		counters             []string
		histogram            string
		modelLabel           string
	}
	wants := map[Flavor]want{
		FlavorVLLM: {
			running: pressureSeries{family: "vllm:num_requests_running"}, waiting: pressureSeries{family: "vllm:num_requests_waiting"},
			kv:        pressureSeries{family: "vllm:kv_cache_usage_perc"},
			counters:  []string{"vllm:prompt_tokens_total", "vllm:generation_tokens_total"},
			histogram: "vllm:time_to_first_token_seconds", modelLabel: "model_name",
		},
		FlavorSGLang: {
			running: pressureSeries{family: "sglang:num_running_reqs"}, waiting: pressureSeries{family: "sglang:num_queue_reqs"},
			kv:        pressureSeries{family: "sglang:token_usage"},
			counters:  []string{"sglang:prompt_tokens_total", "sglang:generation_tokens_total"},
			histogram: "sglang:time_to_first_token_seconds", modelLabel: "model_name",
		},
		FlavorLlamaCPP: {
			running: pressureSeries{family: "llamacpp:requests_processing"}, waiting: pressureSeries{family: "llamacpp:requests_deferred"},
			kv:       pressureSeries{family: "llamacpp:kv_cache_usage_ratio"},
			counters: []string{"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total"},
		},
		FlavorTGI: {
			running: pressureSeries{family: "tgi_batch_current_size"}, waiting: pressureSeries{family: "tgi_queue_size"},
			counters: []string{"tgi_request_count"},
		},
		FlavorTRTLLMServe: {
			running: pressureSeries{family: "trtllm_num_requests_running"}, waiting: pressureSeries{family: "trtllm_num_requests_waiting"},
			kv:        pressureSeries{family: "trtllm_kv_cache_utilization"},
			counters:  []string{"trtllm_request_success_total"},
			histogram: "trtllm_time_to_first_token_seconds", modelLabel: "model_name",
		},
		FlavorTritonTRTLLM: {
			running:    pressureSeries{"nv_trt_llm_request_metrics", "request_type", "scheduled"},
			waiting:    pressureSeries{"nv_trt_llm_request_metrics", "request_type", "waiting"},
			kv:         pressureSeries{"nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "fraction"},
			counters:   []string{"nv_inference_request_success"},
			modelLabel: "model",
		},
	}
	if got := Flavors(); len(got) != len(wants) {
		t.Fatalf("Flavors() = %v, want the %d flavors tested here", got, len(wants))
	}
	for flavor, w := range wants {
		t.Run(string(flavor), func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Flavor = flavor
				c.Model = `org/model "q"`
				c.MaxNumSeqs = 4
				c.HiddenLoad = 2
				c.HiddenLoadTokens = 1000
				c.KVCapacityTokens = 8000
			})
			if r := h.must(http.MethodPost, "/v1/chat/completions", `{"messages":"12345678","max_tokens":3}`); r.status != http.StatusOK {
				t.Fatalf("chat status %d", r.status)
			}
			r := h.must(http.MethodGet, "/metrics", "")
			if r.status != http.StatusOK || r.header.Get("Content-Type") != metricsContentType {
				t.Fatalf("metrics status %d content type %q", r.status, r.header.Get("Content-Type"))
			}
			families := parseMetrics(t, r.body)
			running, labels := gaugeSample(t, families, w.running.family, w.running.key, w.running.value)
			if running != 2 {
				t.Errorf("%s = %v, want 2 (hidden load)", w.running.family, running)
			}
			if w.modelLabel != "" && labels[w.modelLabel] != `org/model "q"` {
				t.Errorf("%s label = %q", w.modelLabel, labels[w.modelLabel])
			}
			if w.modelLabel == "" && len(labels) != 0 {
				t.Errorf("labels = %v, want none", labels)
			}
			if waiting, _ := gaugeSample(t, families, w.waiting.family, w.waiting.key, w.waiting.value); waiting != 0 {
				t.Errorf("%s = %v, want 0", w.waiting.family, waiting)
			}
			pressureFamilies := map[string]bool{w.running.family: true, w.waiting.family: true}
			if w.kv.family != "" {
				pressureFamilies[w.kv.family] = true
				if kv, _ := gaugeSample(t, families, w.kv.family, w.kv.key, w.kv.value); kv != 0.25 {
					t.Errorf("%s = %v, want 0.25", w.kv.family, kv)
				}
			}
			for _, name := range w.counters {
				mf := families[name]
				if mf.GetType() != dto.MetricType_COUNTER || mf.GetMetric()[0].GetCounter().GetValue() <= 0 {
					t.Errorf("counter %s missing or zero: %v", name, mf)
				}
			}
			if w.histogram != "" {
				mf := families[w.histogram]
				if mf.GetType() != dto.MetricType_HISTOGRAM || mf.GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
					t.Errorf("histogram %s missing or without the one sample: %v", w.histogram, mf)
				}
			}
			wantFamilies := len(pressureFamilies) + len(w.counters)
			if w.histogram != "" {
				wantFamilies++
			}
			if len(families) != wantFamilies {
				t.Errorf("%d families, want %d: %v", len(families), wantFamilies, families)
			}
		})
	}
}

func TestMetricsShowQueueing(t *testing.T) {
	// With one slot, the second request waits until the first finishes.
	h := newHarness(t, func(c *Config) {
		c.MaxNumSeqs = 1
		c.TTFTBase = time.Second
		c.KVCapacityTokens = 100
	})
	ctx := context.Background()
	first := h.async(ctx, http.MethodPost, "/v1/chat/completions", `{"prompt":"1234","max_tokens":2}`)
	h.await("first prefilling", func(s State) bool { return s.Running == 1 && s.ClockWaits == 1 })
	second := h.async(ctx, http.MethodPost, "/v1/completions", `{"prompt":"12345678","max_tokens":2}`)
	h.await("second queued", func(s State) bool { return s.Waiting == 1 })

	families := parseMetrics(t, h.must(http.MethodGet, "/metrics", "").body)
	running, _ := gaugeValue(t, families, "vllm:num_requests_running")
	waiting, _ := gaugeValue(t, families, "vllm:num_requests_waiting")
	kv, _ := gaugeValue(t, families, "vllm:kv_cache_usage_perc")
	if running != 1 || waiting != 1 || kv != 0.02 {
		t.Fatalf("running %v waiting %v kv %v, want 1, 1, 0.02", running, waiting, kv)
	}

	h.fc.Step(time.Second) // the first request's prefill ends; it finishes at once
	if r := receive(t, first); r.status != http.StatusOK {
		t.Fatalf("first status %d", r.status)
	}
	h.await("second prefilling", func(s State) bool { return s.Running == 1 && s.Waiting == 0 && s.ClockWaits == 1 })
	h.fc.Step(time.Second)
	if r := receive(t, second); r.status != http.StatusOK {
		t.Fatalf("second status %d", r.status)
	}
	families = parseMetrics(t, h.must(http.MethodGet, "/metrics", "").body)
	if running, _ := gaugeValue(t, families, "vllm:num_requests_running"); running != 0 {
		t.Fatalf("running after both = %v", running)
	}
	ttft := families["vllm:time_to_first_token_seconds"].GetMetric()[0].GetHistogram()
	if ttft.GetSampleCount() != 2 || ttft.GetSampleSum() != 3 {
		// 1 s for the first, 1 s queued + 1 s prefill for the second.
		t.Fatalf("ttft count %d sum %v, want 2 and 3", ttft.GetSampleCount(), ttft.GetSampleSum())
	}
	if s := h.must(http.MethodGet, "/debug/stats", ""); !bytes.Contains(s.body, []byte(`"max_running":1`)) {
		t.Fatalf("stats %s, want max_running 1", s.body)
	}
}

func TestHiddenLoadInMetricsNotInStats(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxNumSeqs = 8
		c.HiddenLoad = 5
		c.HiddenLoadTokens = 100
		c.KVCapacityTokens = 1000
	})
	families := parseMetrics(t, h.must(http.MethodGet, "/metrics", "").body)
	running, _ := gaugeValue(t, families, "vllm:num_requests_running")
	kv, _ := gaugeValue(t, families, "vllm:kv_cache_usage_perc")
	if running != 5 || kv != 0.5 {
		t.Fatalf("running %v kv %v, want 5 and 0.5", running, kv)
	}
	st := decodeJSON(t, h.must(http.MethodGet, "/debug/stats", "").body)
	if st["in_flight"] != 0.0 || st["max_in_flight"] != 0.0 || st["running"] != 0.0 || st["hidden_running"] != 5.0 {
		t.Fatalf("stats = %v, want no in-flight or running requests and 5 hidden", st)
	}
}

func TestMetricsFaults(t *testing.T) {
	t.Run("fail", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MetricsFail = true })
		if r := h.must(http.MethodGet, "/metrics", ""); r.status != http.StatusInternalServerError {
			t.Fatalf("status %d, want 500", r.status)
		}
	})
	t.Run("oversize", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MetricsOversize = true })
		r := h.must(http.MethodGet, "/metrics", "")
		if r.status != http.StatusOK || len(r.body) <= 1<<20 {
			t.Fatalf("status %d size %d, want 200 and > 1 MiB", r.status, len(r.body))
		}
		families := parseMetrics(t, r.body)
		if _, ok := families["vllm:num_requests_running"]; !ok {
			t.Fatal("oversized exposition lost the engine series")
		}
	})
	t.Run("delay", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MetricsDelay = 2 * time.Second })
		ch := h.async(context.Background(), http.MethodGet, "/metrics", "")
		h.await("metrics delayed", func(s State) bool { return s.ClockWaits == 1 })
		h.fc.Step(2*time.Second - 1)
		if h.fc.Waiters() != 1 {
			t.Fatal("metrics answered before the delay")
		}
		h.fc.Step(1)
		if r := receive(t, ch); r.status != http.StatusOK {
			t.Fatalf("status %d", r.status)
		}
	})
	t.Run("delay cancelled", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MetricsDelay = time.Minute })
		ctx, cancel := context.WithCancel(context.Background())
		ch := h.async(ctx, http.MethodGet, "/metrics", "")
		h.await("metrics delayed", func(s State) bool { return s.ClockWaits == 1 })
		cancel()
		if r := receive(t, ch); r.err == nil {
			t.Fatal("cancelled scrape succeeded")
		}
		h.await("delay abandoned", func(s State) bool { return s.ClockWaits == 0 })
	})
}
