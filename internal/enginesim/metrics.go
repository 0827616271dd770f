package enginesim

import (
	"strconv"
	"strings"
)

// oversizeBytes is the size /metrics is padded beyond with
// Config.MetricsOversize: just over sluice's 1 MiB scrape bound, so a scraper
// that reads 1 MiB+1 bytes sees the overflow.
const oversizeBytes = 1<<20 + 4096

// metricsContentType is the Prometheus text exposition format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// flavorNames are the series names of one metrics flavor; an empty name is
// not exposed. A pressure series may carry a label of its own that selects
// it among the samples of a family its flavor shares between signals
// (Triton's request_type); modelLabel, when set, names the label every
// series carries the model in.
type flavorNames struct {
	running, waiting, kv                string
	runningHelp, waitingHelp, kvHelp    string
	runningLabel, waitingLabel, kvLabel string
	promptName, generatedName           string
	ttft                                string
	requestCount                        string
	modelLabel                          string
	promptHelp, generatedHelp           string
}

var flavors = map[Flavor]flavorNames{
	FlavorVLLM: {
		running:       "vllm:num_requests_running",
		runningHelp:   "Number of requests in model execution batches.",
		waiting:       "vllm:num_requests_waiting",
		waitingHelp:   "Number of requests waiting to be processed.",
		kv:            "vllm:kv_cache_usage_perc",
		kvHelp:        "KV-cache usage. 1 means 100 percent usage.",
		promptName:    "vllm:prompt_tokens_total",
		promptHelp:    "Number of prefill tokens processed.",
		generatedName: "vllm:generation_tokens_total",
		generatedHelp: "Number of generation tokens processed.",
		ttft:          "vllm:time_to_first_token_seconds",
		modelLabel:    "model_name",
	},
	FlavorSGLang: {
		running:       "sglang:num_running_reqs",
		runningHelp:   "The number of running requests.",
		waiting:       "sglang:num_queue_reqs",
		waitingHelp:   "The number of requests in the waiting queue.",
		kv:            "sglang:token_usage",
		kvHelp:        "The token usage.",
		promptName:    "sglang:prompt_tokens_total",
		promptHelp:    "Number of prefill tokens processed.",
		generatedName: "sglang:generation_tokens_total",
		generatedHelp: "Number of generation tokens processed.",
		ttft:          "sglang:time_to_first_token_seconds",
		modelLabel:    "model_name",
	},
	FlavorLlamaCPP: {
		running:       "llamacpp:requests_processing",
		runningHelp:   "Number of requests processing.",
		waiting:       "llamacpp:requests_deferred",
		waitingHelp:   "Number of requests deferred.",
		kv:            "llamacpp:kv_cache_usage_ratio",
		kvHelp:        "KV-cache usage. 1 means 100 percent usage.",
		promptName:    "llamacpp:prompt_tokens_total",
		promptHelp:    "Number of prompt tokens processed.",
		generatedName: "llamacpp:tokens_predicted_total",
		generatedHelp: "Number of generation tokens processed.",
	},
	FlavorTGI: {
		running:      "tgi_batch_current_size",
		runningHelp:  "Current batch size.",
		waiting:      "tgi_queue_size",
		waitingHelp:  "Current queue size.",
		requestCount: "tgi_request_count",
	},
	FlavorTRTLLMServe: {
		running:      "trtllm_num_requests_running",
		runningHelp:  "Number of requests in model execution batches.",
		waiting:      "trtllm_num_requests_waiting",
		waitingHelp:  "Number of requests waiting to be processed.",
		kv:           "trtllm_kv_cache_utilization",
		kvHelp:       "KV cache utilization. 1 means 100 percent usage.",
		requestCount: "trtllm_request_success_total",
		ttft:         "trtllm_time_to_first_token_seconds",
		modelLabel:   "model_name",
	},
	FlavorTritonTRTLLM: {
		running:      "nv_trt_llm_request_metrics",
		runningHelp:  "TRT LLM request metrics",
		runningLabel: `request_type="scheduled"`,
		waiting:      "nv_trt_llm_request_metrics",
		waitingHelp:  "TRT LLM request metrics",
		waitingLabel: `request_type="waiting"`,
		kv:           "nv_trt_llm_kv_cache_block_metrics",
		kvHelp:       "TRT LLM KV cache block metrics",
		kvLabel:      `kv_cache_block_type="fraction"`,
		requestCount: "nv_inference_request_success",
		modelLabel:   "model",
	},
}

// exposition appends Prometheus text exposition lines to a buffer.
type exposition struct {
	b      []byte
	labels string // `{model_name="..."}` or empty
	family string // the family of the last header written
}

// header starts a family, unless it is the family just started: two
// signals of one family share its header.
func (x *exposition) header(name, help, typ string) {
	if name == x.family {
		return
	}
	x.family = name
	x.b = append(x.b, "# HELP "...)
	x.b = append(x.b, name...)
	x.b = append(x.b, ' ')
	x.b = append(x.b, help...)
	x.b = append(x.b, "\n# TYPE "...)
	x.b = append(x.b, name...)
	x.b = append(x.b, ' ')
	x.b = append(x.b, typ...)
	x.b = append(x.b, '\n')
}

func (x *exposition) sample(name, extraLabel string, v float64) {
	x.b = append(x.b, name...)
	switch {
	case extraLabel != "" && x.labels != "":
		x.b = append(x.b, x.labels[:len(x.labels)-1]...)
		x.b = append(x.b, ',')
		x.b = append(x.b, extraLabel...)
		x.b = append(x.b, '}')
	case extraLabel != "":
		x.b = append(x.b, '{')
		x.b = append(x.b, extraLabel...)
		x.b = append(x.b, '}')
	default:
		x.b = append(x.b, x.labels...)
	}
	x.b = append(x.b, ' ')
	x.b = strconv.AppendFloat(x.b, v, 'g', -1, 64)
	x.b = append(x.b, '\n')
}

func (x *exposition) scalar(name, help, typ, label string, v float64) {
	if name == "" {
		return
	}
	x.header(name, help, typ)
	x.sample(name, label, v)
}

func (x *exposition) histogram(name, help string, h *histogram) {
	if name == "" {
		return
	}
	x.header(name, help, "histogram")
	bucket := name + "_bucket"
	var cum uint64
	var le []byte
	for i, bound := range ttftBuckets {
		cum += h.counts[i]
		le = append(le[:0], `le="`...)
		le = strconv.AppendFloat(le, bound, 'g', -1, 64)
		le = append(le, '"')
		x.sample(bucket, string(le), float64(cum))
	}
	x.sample(bucket, `le="+Inf"`, float64(h.count))
	x.sample(name+"_sum", "", h.sum)
	x.sample(name+"_count", "", float64(h.count))
}

// labelValue escapes v for a label value in the text exposition format.
func labelValue(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// metricsLabels returns the label set of flavor's series for model.
func metricsLabels(flavor Flavor, model string) string {
	key := flavors[flavor].modelLabel
	if key == "" {
		return ""
	}
	return `{` + key + `="` + labelValue(model) + `"}`
}

// appendMetrics renders snap in flavor's names with labels (from
// metricsLabels).
func appendMetrics(b []byte, flavor Flavor, labels string, snap *metricsSnapshot) []byte {
	names := flavors[flavor]
	x := exposition{b: b, labels: labels}
	st := &snap.state
	x.scalar(names.running, names.runningHelp, "gauge", names.runningLabel, float64(st.Running+st.HiddenRunning))
	x.scalar(names.waiting, names.waitingHelp, "gauge", names.waitingLabel, float64(st.Waiting))
	x.scalar(names.kv, names.kvHelp, "gauge", names.kvLabel, st.KVUsage())
	x.scalar(names.promptName, names.promptHelp, "counter", "", float64(snap.promptTokens))
	x.scalar(names.generatedName, names.generatedHelp, "counter", "", float64(snap.generationTokens))
	x.scalar(names.requestCount, "Total number of requests.", "counter", "", float64(snap.requestsServed))
	x.histogram(names.ttft, "Histogram of time to first token in seconds.", &snap.ttft)
	return x.b
}

// appendPadding appends valid gauge series until b is larger than
// oversizeBytes.
func appendPadding(b []byte) []byte {
	x := exposition{b: b}
	const name = "enginesim_metrics_padding"
	x.header(name, "Padding series that make the exposition oversized.", "gauge")
	var label []byte
	for i := 0; len(x.b) <= oversizeBytes; i++ {
		label = append(label[:0], `index="`...)
		label = strconv.AppendInt(label, int64(i), 10)
		label = append(label, '"')
		x.sample(name, string(label), 0)
	}
	return x.b
}
