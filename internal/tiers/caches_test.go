package tiers

import (
	"maps"
	"net/http/httptest"
	"testing"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/enginesim"
	"github.com/sluice-dev/sluice/internal/pressure"
	"github.com/sluice-dev/sluice/internal/readiness"
	"github.com/sluice-dev/sluice/internal/scheduler"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/source/sourcetest"
)

// TestCacheRegistrations proves the registrations the router derives from a
// snapshot are what the readiness and pressure caches accept.
func TestCacheRegistrations(t *testing.T) {
	capacity := sourcetest.Tier("ns/llama", []string{"llama"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: "http://127.0.0.1:8001", Max: 2}, {ID: "gpu1", Endpoint: "http://127.0.0.1:8002/", Max: 3},
			{ID: "gpu2", Endpoint: "http://127.0.0.1:8003", Max: 4}},
		func(s *v1alpha1.ReplicaTierSpec) {
			s.Members[0].Metrics = &v1alpha1.MetricsSpec{Engine: v1alpha1.EngineSGLang, Path: "/custom/metrics"}
			s.Members[2].Metrics = &v1alpha1.MetricsSpec{Path: "/metrics", Series: &v1alpha1.SeriesSpec{
				Running: `srv_requests{state="running"}`, KVUsage: "srv_kv_cache_usage_ratio"}}
		})
	roundRobin := sourcetest.Tier("ns/rr", []string{"rr"}, "", []sourcetest.Member{{ID: "a", Endpoint: "http://127.0.0.1:9001"}, {ID: "b", Endpoint: "http://127.0.0.1:9002"}})
	s := source.Snapshot{Tiers: []source.Tier{capacity, roundRobin}}

	rt := ReadinessTiers(s)
	if len(rt) != 2 || rt[0].Key != "ns/llama" || rt[0].ServedModel != "served/model" || len(rt[0].Members) != 3 ||
		rt[0].Members[1].Endpoint != "http://127.0.0.1:8002/" {
		t.Fatalf("readiness tiers = %+v", rt)
	}
	pt := PressureTiers(s)
	if len(pt) != 1 || pt[0].Key != "ns/llama" {
		t.Fatalf("pressure tiers = %+v, want the Capacity tier only", pt)
	}
	if m := pt[0].Members[0]; m.Engine != "sglang" || m.MetricsURL != "http://127.0.0.1:8001/custom/metrics" || m.Capacity != 2 {
		t.Fatalf("gpu0 = %+v", m)
	}
	if m := pt[0].Members[1]; m.Engine != "" || m.MetricsURL != "" || m.Capacity != 3 {
		t.Fatalf("gpu1 without metrics = %+v", m)
	}
	wantSeries := pressure.Series{Running: `srv_requests{state="running"}`, KVUsage: "srv_kv_cache_usage_ratio"}
	if m := pt[0].Members[2]; m.Engine != "" || m.Series != wantSeries || m.MetricsURL != "http://127.0.0.1:8003/metrics" {
		t.Fatalf("gpu2 with named series = %+v", m)
	}

	set := New(Options{})
	set.Apply(sourcetest.Snapshot(capacity))
	wantTargets := map[string]pressure.Target{
		"gpu0": {MetricsURL: "http://127.0.0.1:8001/custom/metrics", Engine: pressure.EngineSGLang},
		"gpu2": {MetricsURL: "http://127.0.0.1:8003/metrics", Series: wantSeries},
	}
	if got := set.MetricsTargets("ns/llama"); !maps.Equal(got, wantTargets) {
		t.Fatalf("MetricsTargets = %+v, want %+v", got, wantTargets)
	}

	rc := readiness.New(readiness.Options{})
	defer rc.Close()
	if err := rc.Reconfigure(rt); err != nil {
		t.Fatalf("readiness.Reconfigure: %v", err)
	}
	pc := pressure.New(pressure.Options{})
	defer pc.Close()
	if err := pc.Reconfigure(pt); err != nil {
		t.Fatalf("pressure.Reconfigure: %v", err)
	}
	var _ ReadinessView = rc
	var _ PressureView = pc
}

// TestNamedSeriesAreSampledLikeAnEngine registers a Capacity tier in front
// of three Triton-flavored enginesims: gpu0 declares the engine, gpu1 and
// gpu2 name the same series themselves. gpu0 and gpu1 carry the same hidden
// load and read the same pressure; gpu2, less loaded, reads less.
func TestNamedSeriesAreSampledLikeAnEngine(t *testing.T) {
	endpoints := make([]string, 3)
	for i, hidden := range []int{3, 3, 1} {
		cfg := enginesim.DefaultConfig()
		cfg.Flavor = enginesim.FlavorTritonTRTLLM
		cfg.MaxNumSeqs, cfg.HiddenLoad, cfg.HiddenLoadTokens, cfg.KVCapacityTokens = 8, hidden, 100, 8000
		sim, err := enginesim.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		endpoints[i] = srv.URL
	}
	series := &v1alpha1.SeriesSpec{
		Running: `nv_trt_llm_request_metrics{request_type="scheduled"}`,
		Waiting: `nv_trt_llm_request_metrics{request_type="waiting"}`,
		KVUsage: `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}`,
	}
	tier := sourcetest.Tier("ns/trt", []string{"trt"}, v1alpha1.StrategyCapacity,
		[]sourcetest.Member{{ID: "gpu0", Endpoint: endpoints[0], Max: 8}, {ID: "gpu1", Endpoint: endpoints[1], Max: 8},
			{ID: "gpu2", Endpoint: endpoints[2], Max: 8}},
		func(s *v1alpha1.ReplicaTierSpec) {
			s.Members[0].Metrics = &v1alpha1.MetricsSpec{Engine: v1alpha1.EngineTritonTRTLLM}
			s.Members[1].Metrics = &v1alpha1.MetricsSpec{Series: series}
			s.Members[2].Metrics = &v1alpha1.MetricsSpec{Series: series}
		})

	sampled := make(chan string, 3)
	pc := pressure.New(pressure.Options{Sampled: func(id string) { sampled <- id }})
	defer pc.Close()
	if err := pc.Reconfigure(PressureTiers(source.Snapshot{Tiers: []source.Tier{tier}})); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Snapshot("ns/trt"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-sampled
	}
	got, err := pc.Peek("ns/trt")
	if err != nil {
		t.Fatal(err)
	}
	// (3 running + 0 waiting) / 8 = 375000 ppm beats KV 300/8000.
	want := scheduler.Pressure{Freshness: scheduler.FreshnessFresh, PPM: 375000,
		RequestState: scheduler.SignalValid, KVState: scheduler.SignalValid}
	if got["gpu0"] != want || got["gpu1"] != want || got["gpu2"].Freshness != scheduler.FreshnessFresh || got["gpu2"].PPM != 125000 {
		t.Fatalf("pressures = %+v, want gpu0 and gpu1 %+v and gpu2 fresh at 125000 ppm", got, want)
	}
}
