package pressure

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/scheduler"
)

// FuzzParse feeds arbitrary bytes to an adapter (chosen by the first
// argument; the last choice is no engine) with an arbitrary named running
// series, and normalizes whatever comes out: neither may panic, a
// successful parse reports at least one signal, and a selector the grammar
// refuses is refused before the exposition is read.
func FuzzParse(f *testing.F) {
	engines := []Engine{EngineVLLM, EngineSGLang, EngineLlamaCPP, EngineTGI, EngineTRTLLMServe, EngineTritonTRTLLM, ""}
	// The smaller fixtures only: the fuzzer minimizes every new input, and
	// minimizing mutations of the 8 KiB vLLM fixture eats the time budget.
	seeds := []struct {
		engine  uint8
		fixture string
	}{
		{0, "vllm_v0.txt"}, {0, "vllm_nan.txt"}, {2, "llamacpp.txt"}, {3, "tgi.txt"},
		{1, "unrelated.txt"}, {0, "malformed.txt"}, {4, "trtllm_serve.txt"}, {5, "triton_trtllm.txt"},
	}
	for _, s := range seeds {
		f.Add(s.engine, readFixture(f, s.fixture), "")
	}
	f.Add(uint8(6), readFixture(f, "custom.txt"), `srv_requests{model="chat",state="running"}`)
	f.Add(uint8(5), readFixture(f, "triton_trtllm.txt"), `nv_trt_llm_request_metrics{request_type="active"}`)
	f.Add(uint8(6), []byte("a{b=\"c\"} 1\n"), `a{b="c",d="}"}`)
	f.Add(uint8(6), []byte("a 1\n"), `a{b="c"`)
	f.Add(uint8(0), []byte(""), "")
	f.Add(uint8(0), []byte("vllm:num_requests_running -1\nvllm:num_requests_waiting 1e400\n"), "")
	f.Add(uint8(0), []byte("# TYPE vllm:num_requests_running histogram\nvllm:num_requests_running_bucket{le=\"+Inf\"} 1\n"), "")
	f.Add(uint8(0), []byte("{\"vllm:kv_cache_usage_perc\"} 0.5\n"), "")
	f.Add(uint8(1), []byte("sglang:token_usage{a=\"\\\"\\n\"} NaN 123\n"), "")
	f.Add(uint8(3), []byte("tgi_queue_size 1\ntgi_batch_current_size 0.5\n"), "")
	f.Add(uint8(1), []byte("# HELP sglang:num_running_reqs The number of running requests.\n"+
		"# TYPE sglang:num_running_reqs gauge\n"+
		"sglang:num_running_reqs{dp_rank=\"0\",model_name=\"m\"} 11.0\n"+
		"sglang:num_running_reqs{dp_rank=\"1\",model_name=\"m\"} 9.0\n"+
		"sglang:num_queue_reqs{dp_rank=\"0\",model_name=\"m\"} 4.0\n"+
		"sglang:token_usage{dp_rank=\"0\",model_name=\"m\"} 0.28\n"), "")
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, engine uint8, data []byte, running string) {
		e := engines[int(engine)%len(engines)]
		_, selErr := parseSelector(running)
		tel, err := Parse(e, Series{Running: running}, bytes.NewReader(data))
		if running != "" && selErr != nil && !errors.Is(err, ErrInvalidSeries) {
			t.Fatalf("%s: selector %q refused by the grammar, Parse error %v", e, running, err)
		}
		if err != nil {
			return
		}
		if tel.Running == nil && tel.Waiting == nil && tel.KVUsage == nil {
			t.Fatalf("%s: nil error without any signal", e)
		}
		p := scheduler.Normalize(now, now, true, 32, tel)
		if p.Freshness != scheduler.FreshnessFresh && p.PPM != 0 {
			t.Fatalf("%s: non-fresh pressure with PPM %d", e, p.PPM)
		}
	})
}
